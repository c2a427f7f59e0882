//! The chunker's table languages end to end (issue 70 item 1): a local source with C,
//! C++, Ruby and Bash files, taken by the default include globs, is built; its symbol
//! table finds each definition by its qualified name (what `find_symbol` looks up) and
//! lists each file's definitions in line order (the outline), with docs and `exported`.
//! A C file nested 100k blocks deep gets a one-line note and the rest still builds.

use atlas_e2e::run;
use atlas_runtime::{Bundle, OpenOptions};

const C: &str = "\
#include <stdio.h>

/** Parses a frobnication header. */
int frob_parse(const char *s) { return s[0]; }

static int frob_helper(void) { return 1; }

struct frob_state { int depth; };
";

const CPP: &str = "\
namespace gear {
/// A gearbox.
class Gearbox {
 public:
  /// Shifts up one gear.
  void shift_up() {}
 private:
  void grind() {}
};
}
";

const RUBY: &str = "\
module Ledger
  # Books an entry.
  class Journal
    def post_entry(amount)
      amount
    end

    private

    def audit_trail
      []
    end
  end
end
";

const BASH: &str = "\
#!/bin/bash
# Deploys the site.
deploy_site() {
  echo deploying
}

_cleanup_tmp() {
  rm -rf /tmp/x
}
";

#[test]
fn table_languages_are_built_into_symbols_and_outlines() {
    let work = tempfile::tempdir().unwrap();
    let deep = format!("int f(void) {{\n{}\n{}\n}}\n", "{".repeat(100_000), "}".repeat(100_000));
    let files = [
        ("src/frob.c", C.to_owned()),
        ("src/gear.cpp", CPP.to_owned()),
        ("lib/ledger.rb", RUBY.to_owned()),
        ("bin/deploy.sh", BASH.to_owned()),
        ("src/deep.c", deep),
    ];
    for (rel, text) in &files {
        let p = work.path().join("src").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(&cfg, "name: langs\nsources:\n  pkg:\n    kind: local\n    path: src\n").unwrap();
    let r = run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let log = format!("{}{}", r.stdout, r.stderr);
    assert!(log.contains("its deep part chunked as lines: 1 file (pkg/src/deep.c)"), "{log}");

    let b = Bundle::open(&work.path().join(".atlas/build/bundle"), OpenOptions::default()).unwrap();
    let table = b.symbols();
    for (name, path, kind, exported, doc) in [
        ("frob_parse", "pkg/src/frob.c", "function", true, Some("Parses a frobnication header.")),
        ("frob_helper", "pkg/src/frob.c", "function", false, None),
        ("frob_state", "pkg/src/frob.c", "struct", true, None),
        ("gear::Gearbox", "pkg/src/gear.cpp", "class", true, Some("A gearbox.")),
        ("Gearbox::shift_up", "pkg/src/gear.cpp", "method", true, Some("Shifts up one gear.")),
        ("Gearbox::grind", "pkg/src/gear.cpp", "method", false, None),
        ("Ledger::Journal", "pkg/lib/ledger.rb", "class", true, Some("Books an entry.")),
        ("Journal::post_entry", "pkg/lib/ledger.rb", "method", true, None),
        ("audit_trail", "pkg/lib/ledger.rb", "method", false, None),
        ("deploy_site", "pkg/bin/deploy.sh", "function", true, Some("Deploys the site.")),
        ("_cleanup_tmp", "pkg/bin/deploy.sh", "function", false, None),
    ] {
        let ids = table.lookup(name);
        assert_eq!(ids.len(), 1, "{name}: {ids:?}");
        let d = &table.defs[ids[0] as usize];
        assert_eq!((d.path.as_str(), d.kind.as_str(), d.exported), (path, kind, Some(exported)), "{name}");
        assert_eq!(d.doc.as_deref(), doc, "{name}");
    }
    let outline: Vec<&str> =
        table.in_file("pkg/lib/ledger.rb").iter().map(|&i| table.defs[i as usize].name.as_str()).collect();
    assert_eq!(
        outline,
        ["Ledger", "Ledger::Journal", "Ledger::Journal::post_entry", "Ledger::Journal::audit_trail"],
        "the outline, in line order"
    );
}
