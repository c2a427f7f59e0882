//! Integration tests of the artifact store: faults are simulated on real files.

use std::fs;
use std::time::Duration;

use atlas_cache::{Cache, Digest, Error, KeyBuilder, LockWait, RemotePolicy, RunRecord};

fn open(dir: &std::path::Path) -> Cache {
    Cache::open(dir, LockWait::NoWait, |_| {}).unwrap()
}

#[test]
fn put_get_roundtrip_and_dedup() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let d1 = c.put(b"hello").unwrap();
    let d2 = c.put(b"hello").unwrap();
    assert_eq!(d1, d2);
    assert_eq!(d1, Digest::of(b"hello"));
    assert_eq!(c.get(d1).unwrap().as_deref(), Some(&b"hello"[..]));
    assert_eq!(c.stats.objects_written.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(fs::read_dir(dir.path().join("tmp")).unwrap().next().is_none(), "no temp files left behind");
}

/// Each corruption kind is detected on read, evicted, and never served.
#[test]
fn corrupt_objects_are_detected_evicted_and_never_served() {
    type Damage = fn(&std::path::Path);
    let cases: [(&str, Damage); 3] = [
        ("truncated", |p| {
            let b = fs::read(p).unwrap();
            fs::write(p, &b[..b.len() / 2]).unwrap();
        }),
        ("zero-byte", |p| fs::write(p, b"").unwrap()),
        ("bit-flipped", |p| {
            let mut b = fs::read(p).unwrap();
            b[3] ^= 0x10;
            fs::write(p, b).unwrap();
        }),
    ];
    for (name, damage) in cases {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let d = c.put(b"some artifact bytes that matter").unwrap();
        let key = KeyBuilder::new("test").str("k", name).finish();
        c.set_ref("memo", key, d).unwrap();
        damage(&c.object_path(d));
        assert_eq!(c.get_ref("memo", key).unwrap(), None, "{name}: a ref to a corrupt object is a miss");
        assert!(!c.object_path(d).exists(), "{name}: corrupt object evicted");
        assert_eq!(c.get(d).unwrap(), None, "{name}");
        let events = c.take_corruptions();
        assert_eq!(events.len(), 1, "{name}: reported once: {events:?}");
        assert!(events[0].contains("corrupt cache object"), "{name}: {}", events[0]);
        // Recompute: the same put heals it.
        assert_eq!(c.put(b"some artifact bytes that matter").unwrap(), d);
        assert_eq!(c.get_ref("memo", key).unwrap(), Some(d), "{name}: healed");
    }
}

#[test]
fn get_required_names_the_path_of_a_corrupt_object() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let d = c.put(b"payload").unwrap();
    fs::write(c.object_path(d), b"paylaod").unwrap();
    let err = c.get_required(d).unwrap_err();
    assert!(matches!(err, Error::DataCorruption { ref path, .. } if path == &c.object_path(d)), "{err}");
}

#[test]
fn garbled_ref_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let d = c.put(b"x").unwrap();
    let key = KeyBuilder::new("t").finish();
    c.set_ref("ns", key, d).unwrap();
    let hex = key.to_hex();
    fs::write(dir.path().join("refs/ns").join(&hex[..2]).join(&hex[2..]), "not a digest").unwrap();
    assert_eq!(c.get_ref("ns", key).unwrap(), None);
}

#[test]
fn second_open_fails_with_a_clear_message_while_locked() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    let err = Cache::open(dir.path(), LockWait::NoWait, |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("locked by another atlas-pipeline run"), "{msg}");
    assert!(msg.contains(&format!("pid {}", std::process::id())), "names the holder: {msg}");
    drop(first);
    open(dir.path());
}

#[test]
fn waiting_open_gets_the_lock_once_released() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    let path = dir.path().to_owned();
    let t = std::thread::spawn(move || {
        let mut told = false;
        let c = Cache::open(&path, LockWait::Up(Duration::from_secs(20)), |_| told = true);
        (c.is_ok(), told)
    });
    std::thread::sleep(Duration::from_millis(400));
    drop(first);
    assert_eq!(t.join().unwrap(), (true, true));
}

#[test]
fn leftover_temp_files_of_a_killed_writer_are_cleared_on_open() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    fs::write(dir.path().join("tmp/12345-0"), b"half an obj").unwrap();
    let _c = open(dir.path());
    assert!(fs::read_dir(dir.path().join("tmp")).unwrap().next().is_none());
}

fn run(c: &Cache, id: &str, pipeline: &str, at: u64, objects: &[Digest], refs: &[String]) {
    c.record_run(&RunRecord {
        id: id.into(),
        pipeline: pipeline.into(),
        started_unix_ms: at,
        finished_unix_ms: at,
        detail: serde_json::Value::Null,
        objects: objects.iter().copied().collect(),
        refs: refs.iter().cloned().collect(),
    })
    .unwrap();
}

#[test]
fn gc_keeps_everything_the_latest_run_references() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let old = c.put(b"old only").unwrap();
    let shared = c.put(b"shared").unwrap();
    let new = c.put(b"new only").unwrap();
    let other = c.put(b"other pipeline").unwrap();
    let orphan = c.put(b"never referenced (interrupted run)").unwrap();
    let k_old = KeyBuilder::new("t").str("v", "old").finish();
    let k_new = KeyBuilder::new("t").str("v", "new").finish();
    c.set_ref("item", k_old, old).unwrap();
    c.set_ref("item", k_new, new).unwrap();
    run(&c, "r1", "a", 1, &[old, shared], &[Cache::ref_name("item", k_old)]);
    run(&c, "r2", "a", 2, &[shared, new], &[Cache::ref_name("item", k_new)]);
    run(&c, "r3", "b", 3, &[other], &[]);

    let report = c.gc(1).unwrap();
    assert_eq!((report.kept_runs, report.removed_runs), (2, 1));
    assert_eq!(report.removed_objects, 2, "old-only and orphan: {report:?}");
    assert_eq!(report.removed_refs, 1);
    for d in [shared, new, other] {
        assert!(c.get(d).unwrap().is_some());
    }
    for d in [old, orphan] {
        assert!(c.get(d).unwrap().is_none());
    }
    assert_eq!(c.get_ref("item", k_new).unwrap(), Some(new));
    assert_eq!(c.get_ref("item", k_old).unwrap(), None);
    assert_eq!(c.latest_run("a").unwrap().unwrap().id, "r2");
}

#[test]
fn key_builder_is_injective_over_part_boundaries() {
    let a = KeyBuilder::new("d").str("x", "ab").str("y", "c").finish();
    let b = KeyBuilder::new("d").str("x", "a").str("y", "bc").finish();
    assert_ne!(a, b);
}

/// An in-memory remote: a shared map, with switches to fail or to corrupt.
#[derive(Debug, Default, Clone)]
struct MemRemote {
    map: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, Vec<u8>>>>,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    gets: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl atlas_cache::Remote for MemRemote {
    fn get(&self, name: &str) -> Result<Option<Vec<u8>>, atlas_cache::RemoteError> {
        self.gets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.down.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("connection refused".into());
        }
        Ok(self.map.lock().unwrap().get(name).cloned())
    }
    fn put(&self, name: &str, bytes: Vec<u8>) {
        self.map.lock().unwrap().insert(name.to_owned(), bytes);
    }
    fn flush(&self) -> Result<(), atlas_cache::RemoteError> {
        if self.down.load(std::sync::atomic::Ordering::Relaxed) { Err("connection refused".into()) } else { Ok(()) }
    }
}

#[test]
fn a_remote_is_read_through_written_behind_checked_and_dropped_when_it_fails() {
    let remote = MemRemote::default();
    let key = KeyBuilder::new("t").str("k", "v").finish();
    // Machine A writes through to the remote.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ca = open(a.path()).with_remote(Box::new(remote.clone()), RemotePolicy::trusted());
    let d = ca.put(b"shared").unwrap();
    ca.set_ref("memo", key, d).unwrap();
    ca.flush_remote();
    assert_eq!(remote.map.lock().unwrap().len(), 2);
    // Machine B, empty, reads the memo entry and its object through it.
    let cb = open(b.path()).with_remote(Box::new(remote.clone()), RemotePolicy::trusted());
    assert_eq!(cb.get_ref("memo", key).unwrap(), Some(d));
    assert_eq!(cb.get(d).unwrap().as_deref(), Some(&b"shared"[..]));
    assert!(b.path().join("objects").join(&d.to_hex()[..2]).join(&d.to_hex()[2..]).is_file(), "kept locally");
    // A corrupt remote object is reported, not used.
    let bad = Digest::of(b"other");
    remote.map.lock().unwrap().insert(format!("objects/{bad}"), b"tampered".to_vec());
    assert_eq!(cb.get(bad).unwrap(), None);
    let c = cb.take_corruptions();
    assert!(c.len() == 1 && c[0].contains("corrupt remote cache object"), "{c:?}");
    // A remote that fails is asked once, then left alone, with one warning.
    remote.down.store(true, std::sync::atomic::Ordering::Relaxed);
    let before = remote.gets.load(std::sync::atomic::Ordering::Relaxed);
    for s in ["x", "y", "z"] {
        assert_eq!(cb.get(Digest::of(s.as_bytes())).unwrap(), None);
    }
    assert_eq!(remote.gets.load(std::sync::atomic::Ordering::Relaxed), before + 1);
    let w = cb.take_warnings();
    assert!(w.len() == 1 && w[0].contains("building locally"), "{w:?}");
    // Local work goes on.
    let d2 = cb.put(b"local only").unwrap();
    assert_eq!(cb.get(d2).unwrap().as_deref(), Some(&b"local only"[..]));
}

/// A toy signature for the trust tests: the message's blake3 under a key name.
fn toy_signer(key: &'static str) -> atlas_cache::trust::Signer {
    Box::new(move |m: &[u8]| Ok(format!("{key}:{}", blake3::hash(m).to_hex())))
}

fn toy_verifier(key: &'static str) -> atlas_cache::trust::Verifier {
    use atlas_cache::trust::SigCheck;
    Box::new(move |m: &[u8], sig: &str| match sig.split_once(':') {
        Some((k, _)) if k != key => SigCheck::UnknownKey,
        _ if sig == format!("{key}:{}", blake3::hash(m).to_hex()) => SigCheck::Valid,
        _ => SigCheck::Invalid("bad signature".into()),
    })
}

#[test]
fn a_remote_ref_is_bound_to_its_key_and_a_copied_one_is_refused_and_recomputed() {
    let remote = MemRemote::default();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ca = open(a.path()).with_remote(Box::new(remote.clone()), RemotePolicy::trusted());
    let (readme, trouble) =
        (KeyBuilder::new("t").str("page", "readme").finish(), KeyBuilder::new("t").str("page", "trouble").finish());
    let (dr, dt) = (ca.put(b"readme text").unwrap(), ca.put(b"troubleshooting text").unwrap());
    ca.set_ref("clean-item", readme, dr).unwrap();
    ca.set_ref("clean-item", trouble, dt).unwrap();
    ca.flush_remote();
    // A hostile writer copies the troubleshooting page's record over the readme's.
    let names = |k: Digest| format!("refs/{}", Cache::ref_name("clean-item", k));
    let copied = remote.map.lock().unwrap()[&names(trouble)].clone();
    remote.map.lock().unwrap().insert(names(readme), copied);
    // A plain digest (no record) is refused too: it names no entry.
    let other = KeyBuilder::new("t").str("page", "other").finish();
    remote.map.lock().unwrap().insert(names(other), dt.to_hex().into_bytes());
    let cb = open(b.path()).with_remote(Box::new(remote), RemotePolicy::trusted());
    assert_eq!(cb.get_ref("clean-item", readme).unwrap(), None, "the copied record is never used");
    assert_eq!(cb.get_ref("clean-item", other).unwrap(), None);
    assert_eq!(cb.get_ref("clean-item", trouble).unwrap(), Some(dt), "the honest record still is");
    let c = cb.take_corruptions();
    assert_eq!(c.len(), 2, "{c:?}");
    assert!(c[0].contains("refused") && c[0].contains("its record is for clean-item/"), "{c:?}");
}

#[test]
fn refs_from_a_shared_remote_are_used_only_when_signed_by_a_trusted_key() {
    let remote = MemRemote::default();
    let (a, b, c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let key = KeyBuilder::new("t").str("k", "signed").finish();
    let signed = RemotePolicy { signer: Some(toy_signer("ci")), ..RemotePolicy::default() };
    let ca = open(a.path()).with_remote(Box::new(remote.clone()), signed);
    let d = ca.put(b"built by ci").unwrap();
    ca.set_ref("memo", key, d).unwrap();
    // An unsigned writer shares the remote.
    let unsigned_key = KeyBuilder::new("t").str("k", "unsigned").finish();
    let cu = open(c.path()).with_remote(Box::new(remote.clone()), RemotePolicy::trusted());
    let du = cu.put(b"built by someone").unwrap();
    cu.set_ref("memo", unsigned_key, du).unwrap();
    let reader = |key: &'static str| RemotePolicy { verifier: Some(toy_verifier(key)), ..RemotePolicy::default() };
    let cb = open(b.path()).with_remote(Box::new(remote.clone()), reader("ci"));
    assert_eq!(cb.get_ref("memo", key).unwrap(), Some(d));
    assert_eq!(cb.get_ref("memo", unsigned_key).unwrap(), None, "unsigned: not used");
    let w = cb.take_warnings();
    assert!(w.len() == 1 && w[0].contains("unsigned refs"), "{w:?}");
    drop(cb);
    // A reader trusting another key does not use the signed record, and says so once.
    let other = tempfile::tempdir().unwrap();
    let co = open(other.path()).with_remote(Box::new(remote.clone()), reader("someone-else"));
    assert_eq!(co.get_ref("memo", key).unwrap(), None);
    let w = co.take_warnings();
    assert!(w.len() == 1 && w[0].contains("keys this machine does not trust"), "{w:?}");
    // A signed record replayed under another key fails its signature.
    let names = |k: Digest| format!("refs/{}", Cache::ref_name("memo", k));
    let mut replayed: atlas_cache::RefRecord =
        serde_json::from_slice(&remote.map.lock().unwrap()[&names(key)]).unwrap();
    let victim = KeyBuilder::new("t").str("k", "victim").finish();
    replayed.entry = Cache::ref_name("memo", victim);
    remote.map.lock().unwrap().insert(names(victim), serde_json::to_vec(&replayed).unwrap());
    let r = tempfile::tempdir().unwrap();
    let cr = open(r.path()).with_remote(Box::new(remote), reader("ci"));
    assert_eq!(cr.get_ref("memo", victim).unwrap(), None);
    assert!(cr.take_corruptions()[0].contains("signature does not verify"));
}

#[test]
fn a_read_only_remote_is_never_written() {
    let remote = MemRemote::default();
    let a = tempfile::tempdir().unwrap();
    let policy = RemotePolicy { read_only: true, ..RemotePolicy::default() };
    let ca = open(a.path()).with_remote(Box::new(remote.clone()), policy);
    let d = ca.put(b"local").unwrap();
    ca.set_ref("memo", KeyBuilder::new("t").finish(), d).unwrap();
    ca.flush_remote();
    assert!(remote.map.lock().unwrap().is_empty());
}
