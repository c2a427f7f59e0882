// Runs one of atlas's binaries from the package npm installed for this platform
// (esbuild's pattern: the launcher lists one optional dependency per platform, each
// restricted by `os`, `cpu` and `libc`, and npm installs only the one that matches).
"use strict";

const { spawn } = require("child_process");
const path = require("path");

// `${process.platform}-${process.arch}` to the platform package's suffix.
const PLATFORMS = {
  "linux-x64": "linux-x64-gnu",
  "linux-arm64": "linux-arm64-gnu",
  "darwin-arm64": "darwin-arm64",
  "darwin-x64": "darwin-x64",
  "win32-x64": "win32-x64-msvc",
};

function fail(message) {
  process.stderr.write(`atlas-mcp-server: error: ${message}\n`);
  process.exit(1);
}

function binary(name) {
  const exe = name + (process.platform === "win32" ? ".exe" : "");
  const key = `${process.platform}-${process.arch}`;
  const suffix = PLATFORMS[key];
  if (!suffix) {
    fail(`no atlas build for ${key}; use the wheel (uvx atlas-mcp-server) or build from source`);
  }
  const pkg = `atlas-mcp-server-${suffix}`;
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    fail(`the package ${pkg} is not installed; reinstall atlas-mcp-server without --omit=optional or --no-optional`);
  }
  return path.join(dir, "bin", exe);
}

module.exports = function run(name) {
  const child = spawn(binary(name), process.argv.slice(2), { stdio: "inherit" });
  // An editor stops its MCP server with a signal: pass it on.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => child.kill(signal));
  }
  child.on("error", (e) => fail(`could not start ${name}: ${e.message}`));
  child.on("exit", (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else {
      process.exit(code === null ? 1 : code);
    }
  });
};
