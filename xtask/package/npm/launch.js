// Runs one of atlas's binaries from the package npm installed for this platform
// (esbuild's pattern: the launcher lists one optional dependency per platform, each
// restricted by `os`, `cpu` and `libc`, and npm installs only the one that matches).
"use strict";

const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");

// This launcher's own package: its name and version pin the platform package.
const SELF = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf8"));

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
  const pkg = `${SELF.name}-${suffix}`;
  // Only where npm puts this package's own optional dependency: nested in it, or
  // beside it in the same node_modules. Never a parent folder's node_modules or
  // NODE_PATH (another install, another version), and only at this version.
  const own = path.resolve(__dirname, "..");
  const places = [path.join(own, "node_modules", pkg)];
  if (path.basename(path.dirname(own)) === "node_modules") {
    places.push(path.join(path.dirname(own), pkg));
  }
  for (const dir of places) {
    let manifest;
    try {
      manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
    } catch {
      continue;
    }
    if (manifest.name !== pkg || manifest.version !== SELF.version) {
      fail(
        `${dir} holds ${manifest.name}@${manifest.version}, not ${pkg}@${SELF.version}; reinstall ${SELF.name}@${SELF.version}`
      );
    }
    return path.join(dir, "bin", exe);
  }
  fail(`the package ${pkg}@${SELF.version} is not installed; reinstall ${SELF.name} without --omit=optional or --no-optional`);
}

module.exports = function run(name) {
  // The child ends when this launcher does, even by SIGKILL (it watches its parent).
  const env = Object.assign({}, process.env, { ATLAS_EXIT_WITH_LAUNCHER: "1" });
  const child = spawn(binary(name), process.argv.slice(2), { stdio: "inherit", env });
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
