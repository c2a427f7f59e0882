//! Code chunking: fixtures per language (`check(path, source, expected)`), cases from
//! the real repositories, and the coverage and exact-range invariants over every file.

use std::path::Path;

use atlas_stages::chunk::ChunkParams;
use atlas_stages::code::{CodeChunks, chunk_code};
use atlas_stages::source::language_of;
use expect_test::{Expect, expect};

fn params() -> ChunkParams {
    ChunkParams { code_max_lines: 10, code_tiny_lines: 3, code_merge_max_lines: 10, ..ChunkParams::default() }
}

fn chunks(path: &str, src: &str, p: &ChunkParams) -> CodeChunks {
    let out = chunk_code(src, language_of(path).unwrap(), path, p).expect("a tree-sitter language");
    assert_invariants(path, src, &out);
    out
}

/// Every line is in exactly one chunk or dropped; each chunk's text (after its
/// context) is exactly its line range.
fn assert_invariants(path: &str, src: &str, out: &CodeChunks) {
    let lines: Vec<&str> = src.lines().collect();
    let mut seen = vec![0u8; lines.len()];
    for c in &out.chunks {
        assert!(c.start_line >= 1 && c.start_line <= c.end_line, "{path}: bad range {}-{}", c.start_line, c.end_line);
        let exact = lines[c.start_line as usize - 1..c.end_line as usize].join("\n");
        assert_eq!(&c.text[c.overlap as usize..], exact, "{path}: chunk {}-{} text", c.start_line, c.end_line);
        for r in c.start_line..=c.end_line {
            seen[r as usize - 1] += 1;
        }
    }
    for d in &out.dropped {
        for r in d.0..=d.1 {
            seen[r as usize - 1] += 1;
        }
    }
    for (i, n) in seen.iter().enumerate() {
        assert_eq!(*n, 1, "{path}:{}: line in {n} chunks/drops: {:?}", i + 1, lines[i]);
    }
}

fn render(out: &CodeChunks) -> String {
    let mut s = String::new();
    for c in &out.chunks {
        s.push_str(&format!(
            "{}-{} {} {}",
            c.start_line,
            c.end_line,
            c.symbol_kind,
            c.symbol.as_deref().unwrap_or("-")
        ));
        if !c.symbols.is_empty() {
            s.push_str(&format!(" {:?}", c.symbols));
        }
        if c.overlap > 0 {
            s.push_str(" +context");
        }
        s.push('\n');
    }
    for d in &out.dropped {
        if d.2 != "blank" {
            s.push_str(&format!("dropped {}-{} {}\n", d.0, d.1, d.2));
        }
    }
    s
}

fn check(path: &str, src: &str, expected: Expect) {
    expected.assert_eq(&render(&chunks(path, src, &params())));
}

#[test]
fn python_classes_methods_decorators_and_license() {
    check(
        "pkg/model.py",
        r#""""Models."""

# Copyright (C) 2024 Example Corp.
# Licensed under the Apache License, Version 2.0.

import os
SETTINGS = {"a": 1}


@dataclass(
    frozen=True,
)
class Point:
    """A point."""

    x: int

    def dump_dict(self):
        return {"x": self.x}


class Shape:
    # pylint: disable-next=invalid-name
    def dump_dict(self):
        return {}

    @property
    def area(self):
        return 0

    @area.setter
    def area(self, v):
        self._a = v


def outer():
    def middle():
        def inner():
            def innermost():
                return 1
            return innermost()
        return inner()
    return middle()
"#,
        expect![[r#"
            1-1 module -
            6-7 module -
            10-19 class Point ["Point.dump_dict"]
            22-23 class Shape
            24-33 merged Shape.dump_dict ["Shape.dump_dict", "Shape.area"]
            36-43 function outer
            dropped 3-4 license
        "#]],
    );
}

#[test]
fn python_long_function_splits_with_signature_context_and_nested_items() {
    let mut src = String::from("def big(a, b):\n    total = 0\n");
    for i in 0..20 {
        src.push_str(&format!("    total += {i}\n"));
    }
    src.push_str("    def helper(x):\n        return x\n    return helper(total)\n");
    check(
        "big.py",
        &src,
        expect![[r#"
            1-10 function big
            11-20 function big +context
            21-22 function big +context
            23-24 function big.helper
            25-25 function big +context
        "#]],
    );
}

#[test]
fn rust_impls_traits_macros_mods_and_attributes() {
    check(
        "src/lib.rs",
        r#"// SPDX-License-Identifier: BSD-3-Clause-Clear

//! Crate docs.

use std::fmt;

/// A wrapper.
#[derive(Debug, Clone)]
pub struct Wrapper<T>(T);

impl<T: fmt::Display> fmt::Display for &Wrapper<T>
where
    T: Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Makes a getter.
macro_rules! getter {
    ($name:ident) => {
        fn $name(&self) -> u8 { 0 }
    };
}

getter!(one);

pub trait Shape {
    fn area(&self) -> f64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn works() {
        assert_eq!(1, 1);
    }

    #[test]
    fn also_works() {
        let s = "a long \
                 string";
        assert!(!s.is_empty());
    }
}
"#,
        expect![[r#"
            3-5 module -
            7-9 struct Wrapper
            11-18 impl impl fmt::Display for &Wrapper<T> ["Wrapper::fmt"]
            20-25 macro getter!
            27-31 merged getter! ["getter!", "Shape", "Shape::area"]
            33-35 mod tests
            37-40 function tests::works
            42-47 function tests::also_works
            dropped 1-1 license
            dropped 48-48 closing
        "#]],
    );
}

#[test]
fn javascript_and_typescript() {
    check(
        "web/app.js",
        "import x from 'x';\n\n/** Adds. */\nexport function add(a, b) {\n  return a + b;\n}\n\nconst mul = (a, b) => a * b;\n\nclass Calc {\n  constructor() {\n    this.v = 0;\n  }\n  dump_dict() {\n    return {};\n  }\n}\n",
        expect![[r#"
            1-1 module -
            3-6 function add
            8-8 function mul
            10-17 class Calc ["Calc.constructor", "Calc.dump_dict"]
        "#]],
    );
    check(
        "web/types.ts",
        "export interface Shape {\n  area(): number;\n}\n\ntype Id = string;\n\nenum Color { Red, Green }\n\nexport abstract class Base implements Shape {\n  abstract area(): number;\n  describe(): string {\n    return `area ${this.area()}`;\n  }\n}\n",
        expect![[r#"
            1-7 merged Shape ["Shape", "Shape.area", "Id", "Color"]
            9-14 class Base ["Base.area", "Base.describe"]
        "#]],
    );
}

#[test]
fn go_and_java() {
    check(
        "svc/server.go",
        "package svc\n\nimport \"fmt\"\n\n// Server serves.\ntype Server struct {\n\tName string\n}\n\n// Start starts it.\nfunc (s *Server) Start() error {\n\tfmt.Println(s.Name)\n\treturn nil\n}\n\nfunc New() *Server {\n\treturn &Server{}\n}\n",
        expect![[r#"
            1-3 module -
            5-8 struct Server
            10-14 method Server.Start
            16-18 function New
        "#]],
    );
    check(
        "src/App.java",
        "package app;\n\nimport java.util.List;\n\n/** The app. */\npublic class App {\n    private int n;\n\n    /** Runs. */\n    @Override\n    public void run() {\n        n++;\n    }\n\n    public App(int n) {\n        this.n = n;\n    }\n}\n\ninterface Shape {\n    double area();\n}\n",
        expect![[r#"
            1-3 module -
            5-7 class App
            9-13 method App.run
            15-17 method App.App
            20-22 interface Shape ["Shape.area"]
            dropped 18-18 closing
        "#]],
    );
}

#[test]
fn same_named_methods_in_different_classes_get_distinct_qualified_symbols() {
    let src = (0..4)
        .map(|i| format!("class C{i}:\n    def dump_dict(self):\n        a = 1\n        b = 2\n        c = 3\n        return {{}}\n\n    def load_dict(self):\n        a = 1\n        b = 2\n        c = 3\n        return None\n\n"))
        .collect::<String>();
    let out = chunks("m.py", &src, &ChunkParams { code_max_lines: 8, ..params() });
    let syms: Vec<&str> =
        out.chunks.iter().filter_map(|c| c.symbol.as_deref()).filter(|s| s.ends_with("dump_dict")).collect();
    assert_eq!(syms, ["C0.dump_dict", "C1.dump_dict", "C2.dump_dict", "C3.dump_dict"]);
}

#[test]
fn runs_of_tiny_classes_merge_and_keep_their_symbols() {
    let src: String = (0..30).map(|i| format!("class E{i}(Exception):\n    pass\n\n")).collect();
    let out = chunks("errors.py", &src, &ChunkParams::default());
    assert!(out.chunks.len() < 10, "merged: {}", render(&out));
    let all: Vec<&String> = out.chunks.iter().flat_map(|c| &c.symbols).collect();
    assert_eq!(all.len(), 30, "{}", render(&out));
}

// ------------------------------------------------------------- the real repositories

fn files(root: &Path, exts: &[&str]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.contains(&x)) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_file_of_both_repos_is_covered_with_exact_ranges() {
    let Some(root) = crate::corpora::corpora() else { return };
    let p = ChunkParams::default();
    for (repo, exts) in [("concrete-ml/repo", &["py"][..]), ("tfhe-rs/repo", &["rs"][..])] {
        let (mut n, mut lines, mut license) = (0, 0, 0);
        for f in files(&root.join(repo), exts) {
            let src = std::fs::read_to_string(&f).unwrap();
            let path = f.display().to_string();
            let out = chunks(&path, &src, &p);
            n += 1;
            lines += src.lines().count();
            license += out.dropped_lines("license");
        }
        eprintln!("{repo}: {n} files, {lines} lines, {license} licence lines dropped");
        assert!(n > 50);
    }
}

struct RealCase {
    file: &'static str,
    why: &'static str,
    /// `(symbol, kind)` that some chunk must carry.
    symbols: &'static [(&'static str, &'static str)],
    check: fn(&CodeChunks) -> bool,
}

const REAL: &[RealCase] = &[
    RealCase {
        file: "concrete-ml/repo/src/concrete/ml/onnx/onnx_utils.py",
        why: "a 200-line licence after the docstring, then a big module dict",
        symbols: &[("execute_onnx_with_numpy", "function")],
        check: |o| {
            o.dropped_lines("license") > 200 && o.chunks.iter().filter(|c| c.symbol_kind == "module").count() >= 3
        },
    },
    RealCase {
        file: "concrete-ml/repo/src/concrete/ml/quantization/quantized_module.py",
        why: "a property getter and setter with the same name",
        symbols: &[("QuantizedModule.post_processing_params", "method")],
        check: |o| {
            o.chunks.iter().filter(|c| c.symbol.as_deref() == Some("QuantizedModule.post_processing_params")).count()
                >= 2
        },
    },
    RealCase {
        file: "concrete-ml/repo/src/concrete/ml/quantization/quantized_ops.py",
        why: "a 3,000-line file with dozens of small classes",
        symbols: &[("QuantizedGemm.q_impl", "method")],
        check: |o| o.chunks.iter().filter(|c| c.symbol_kind == "class").count() > 20,
    },
    RealCase {
        file: "concrete-ml/repo/src/concrete/ml/sklearn/base.py",
        why: "dump_dict in many classes; functions long enough to split",
        symbols: &[("BaseEstimator.dump_dict", "method"), ("BaseEstimator.compile", "method")],
        check: |o| o.chunks.iter().any(|c| c.overlap > 0),
    },
    RealCase {
        file: "tfhe-rs/repo/tfhe/src/high_level_api/integers/unsigned/ops.rs",
        why: "generic trait impls for references; macro invocations",
        symbols: &[("FheUint::max", "method")],
        check: |o| {
            o.chunks.iter().any(|c| c.symbol_kind == "macro") && o.chunks.iter().any(|c| c.symbol_kind == "impl")
        },
    },
    RealCase {
        file: "tfhe-rs/repo/tfhe/src/high_level_api/array/stride.rs",
        why: "an inline test module of hundreds of lines",
        symbols: &[("test", "mod")],
        check: |o| o.chunks.iter().any(|c| c.symbol.as_deref().is_some_and(|s| s.starts_with("test::"))),
    },
];

#[test]
fn real_code_cases() {
    let Some(root) = crate::corpora::corpora() else { return };
    for case in REAL {
        let src = std::fs::read_to_string(root.join(case.file)).unwrap();
        let out = chunks(case.file, &src, &ChunkParams::default());
        for (sym, kind) in case.symbols {
            let has = out.chunks.iter().any(|c| {
                (c.symbol.as_deref() == Some(*sym) && c.symbol_kind == *kind) || c.symbols.iter().any(|s| s == sym)
            });
            assert!(has, "{} ({}): no {kind} {sym}:\n{}", case.file, case.why, render(&out));
        }
        assert!((case.check)(&out), "{} ({}):\n{}", case.file, case.why, render(&out));
    }
}
