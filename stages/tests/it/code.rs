//! Code chunking: fixtures per language (`check(path, source, expected)`), cases from
//! the real repositories, and the coverage and exact-range invariants over every file.

use std::path::Path;

use atlas_stages::chunk::ChunkParams;
use atlas_stages::chunk::code::{CodeChunks, chunk_code};
use atlas_stages::text::language_of;
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
    // Documentation written in code: one line of text per line of the file, each
    // found on its line.
    for d in &out.docs {
        let text: Vec<&str> = d.text.split('\n').collect();
        assert_eq!(text.len() as u32, d.end_line - d.start_line + 1, "{path}: docs {}-{}", d.start_line, d.end_line);
        for (t, l) in text.iter().zip(&lines[d.start_line as usize - 1..]) {
            assert!(l.contains(t.trim()), "{path}: docs line {t:?} is not on {l:?}");
        }
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

fn with_local_items() -> u8 {
    struct Local;
    fn helper() -> u8 { 1 }
    let _ = Local;
    helper()
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
            33-38 function with_local_items
            40-42 mod tests
            44-47 function tests::works
            49-54 function tests::also_works
            dropped 1-1 license
            dropped 55-55 closing
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
fn slow_every_file_of_both_repos_is_covered_with_exact_ranges() {
    let Some(root) = crate::corpora::corpora() else { return };
    let p = ChunkParams::default();
    for (repo, exts) in [("concrete-ml/repo", &["py"][..]), ("tfhe-rs/repo", &["rs"][..])] {
        let (mut n, mut lines, mut license, mut guides, mut item_docs) = (0, 0, 0, 0, 0);
        for f in files(&root.join(repo), exts) {
            let src = std::fs::read_to_string(&f).unwrap();
            let path = f.display().to_string();
            let out = chunks(&path, &src, &p);
            n += 1;
            lines += src.lines().count();
            license += out.dropped_lines("license");
            guides += out.docs.iter().filter(|d| d.symbol.is_none()).count();
            item_docs += out.docs.iter().filter(|d| d.symbol.is_some()).count();
        }
        eprintln!(
            "{repo}: {n} files, {lines} lines, {license} licence lines dropped, \
             {guides} module guides and {item_docs} long item docs as docs"
        );
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
        file: "concrete-ml/repo/src/concrete/ml/pandas/_development.py",
        why: "a decorator whose arguments span lines starts the function's chunk",
        symbols: &[("left_right_join_to_compile", "function")],
        check: |o| {
            o.chunks.iter().any(|c| {
                c.symbol.as_deref() == Some("left_right_join_to_compile")
                    && c.text.starts_with("@fhe.compiler(")
                    && c.signature.as_deref().is_some_and(|s| s.starts_with("def left_right_join_to_compile("))
            })
        },
    },
    RealCase {
        file: "tfhe-rs/repo/tfhe/src/high_level_api/array/ops.rs",
        why: "macro_rules! definitions and their invocations are chunks",
        symbols: &[("impl_other_binary_ops_variants!", "macro")],
        check: |o| {
            o.chunks.iter().filter(|c| c.symbol.as_deref() == Some("impl_other_binary_ops_variants!")).count() >= 2
        },
    },
    RealCase {
        file: "concrete-ml/repo/src/concrete/ml/sklearn/linear_model.py",
        why: "a 300+ line method split into parts that repeat its signature",
        symbols: &[("SGDClassifier._fit_encrypted", "method")],
        check: |o| {
            let parts: Vec<_> =
                o.chunks.iter().filter(|c| c.symbol.as_deref() == Some("SGDClassifier._fit_encrypted")).collect();
            parts.len() >= 4 && parts[1..].iter().all(|p| p.overlap > 0 && p.text.starts_with("def _fit_encrypted("))
        },
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

/// Structure snapshots (ranges, kinds, symbols; no source text) of real files.
fn check_real(file: &str, expected: Expect) {
    let Some(root) = crate::corpora::corpora() else { return };
    let src = std::fs::read_to_string(root.join(file)).unwrap();
    expected.assert_eq(&render(&chunks(file, &src, &ChunkParams::default())));
}

#[test]
fn real_structure_python_check_inputs() {
    check_real(
        "concrete-ml/repo/src/concrete/ml/common/check_inputs.py",
        expect![[r#"
            7-13 module -
            16-32 function check_array_and_assert
            35-54 function check_X_y_and_assert
            57-74 function check_X_y_and_assert_multi_output
            77-77 module -
            dropped 1-5 docs
        "#]],
    );
}

#[test]
fn real_structure_rust_config() {
    check_real(
        "tfhe-rs/repo/tfhe/src/high_level_api/config.rs",
        expect![[r#"
        1-9 module -
        11-16 struct Config
        18-32 impl impl Config ["Config::from_hpu_device", "Config::public_key_encryption_parameters"]
        34-43 struct ConfigBuilder
        45-53 impl impl Default for ConfigBuilder ["ConfigBuilder::default"]
        55-55 impl impl ConfigBuilder
        56-60 method ConfigBuilder::enable_compression
        62-71 method ConfigBuilder::enable_noise_squashing
        73-90 method ConfigBuilder::enable_noise_squashing_compression
        92-110 method ConfigBuilder::enable_ciphertext_re_randomization
        112-121 method ConfigBuilder::with_custom_parameters
        123-133 method ConfigBuilder::use_dedicated_compact_public_key_parameters
        135-138 method ConfigBuilder::use_dedicated_oprf_key
        140-146 method ConfigBuilder::use_custom_parameters
        148-150 method ConfigBuilder::build
        153-157 impl impl From<ConfigBuilder> for Config ["Config::from"]
        159-179 impl impl From<MetaParameters> for Config ["Config::from"]
        dropped 151-151 closing
    "#]],
    );
}

#[test]
fn real_structure_rust_traits() {
    check_real(
        "tfhe-rs/repo/tfhe/src/high_level_api/traits.rs",
        expect![[r#"
        1-8 module -
        10-20 trait FheEncrypt ["FheEncrypt::encrypt"]
        22-29 impl impl FheEncrypt<Clear, Key> for T ["T::encrypt"]
        31-36 trait FheTrivialEncrypt ["FheTrivialEncrypt::encrypt_trivial"]
        38-52 trait FheTryEncrypt ["FheTryEncrypt::try_encrypt"]
        54-62 trait FheTryTrivialEncrypt ["FheTryTrivialEncrypt::try_encrypt_trivial"]
        64-73 merged FheDecrypt ["FheDecrypt", "FheDecrypt::decrypt", "FheKeyswitch", "FheKeyswitch::keyswitch"]
        75-87 trait FheEq ["FheEq::eq", "FheEq::ne"]
        89-102 trait FheOrd ["FheOrd::lt", "FheOrd::le", "FheOrd::gt", "FheOrd::ge"]
        104-140 merged FheMin ["FheMin", "FheMin::min", "FheMax", "FheMax::max", "RotateLeft", "RotateLeft::rotate_left", "RotateRight", "RotateRight::rotate_right", "RotateLeftAssign", "RotateLeftAssign::rotate_left_assign", "RotateRightAssign", "RotateRightAssign::rotate_right_assign", "DivRem", "DivRem::div_rem"]
        142-152 trait FusedMulScalarDiv ["FusedMulScalarDiv::fused_mul_scalar_div"]
        154-164 trait FusedScalarMulScalarDiv ["FusedScalarMulScalarDiv::fused_scalar_mul_scalar_div"]
        166-174 trait IfThenElse ["IfThenElse::if_then_else", "IfThenElse::select", "IfThenElse::cmux"]
        176-178 trait IfThenZero ["IfThenZero::if_then_zero"]
        180-192 trait ScalarIfThenElse ["ScalarIfThenElse::scalar_if_then_else", "ScalarIfThenElse::scalar_select", "ScalarIfThenElse::scalar_cmux"]
        194-222 merged Flip ["Flip", "Flip::flip", "OverflowingAdd", "OverflowingAdd::overflowing_add", "OverflowingSub", "OverflowingSub::overflowing_sub", "OverflowingMul", "OverflowingMul::overflowing_mul", "OverflowingNeg", "OverflowingNeg::overflowing_neg"]
        224-230 trait BitSlice ["BitSlice::bitslice"]
        232-236 trait Tagged ["Tagged::tag", "Tagged::tag_mut"]
        238-247 trait CiphertextList ["CiphertextList::len", "CiphertextList::is_empty", "CiphertextList::get_kind_of", "CiphertextList::get", "CiphertextList::get_decompression_size_on_gpu"]
        249-260 merged FheId ["FheId", "SquashNoise", "SquashNoise::squash_noise", "FheWait", "FheWait::wait"]
        262-268 struct HpuHandle
        270-279 trait FheHpu ["FheHpu::iop_exec"]
        281-310 merged SizeOnGpu ["SizeOnGpu", "SizeOnGpu::get_size_on_gpu", "AddSizeOnGpu", "AddSizeOnGpu::get_add_size_on_gpu", "SubSizeOnGpu", "SubSizeOnGpu::get_sub_size_on_gpu", "BitAndSizeOnGpu", "BitAndSizeOnGpu::get_bitand_size_on_gpu", "BitOrSizeOnGpu", "BitOrSizeOnGpu::get_bitor_size_on_gpu", "BitXorSizeOnGpu", "BitXorSizeOnGpu::get_bitxor_size_on_gpu", "BitNotSizeOnGpu", "BitNotSizeOnGpu::get_bitnot_size_on_gpu"]
        312-318 trait FheOrdSizeOnGpu ["FheOrdSizeOnGpu::get_gt_size_on_gpu", "FheOrdSizeOnGpu::get_lt_size_on_gpu", "FheOrdSizeOnGpu::get_ge_size_on_gpu", "FheOrdSizeOnGpu::get_le_size_on_gpu"]
        319-347 merged FheMinSizeOnGpu ["FheMinSizeOnGpu", "FheMinSizeOnGpu::get_min_size_on_gpu", "FheMaxSizeOnGpu", "FheMaxSizeOnGpu::get_max_size_on_gpu", "ShlSizeOnGpu", "ShlSizeOnGpu::get_left_shift_size_on_gpu", "ShrSizeOnGpu", "ShrSizeOnGpu::get_right_shift_size_on_gpu", "RotateLeftSizeOnGpu", "RotateLeftSizeOnGpu::get_rotate_left_size_on_gpu", "RotateRightSizeOnGpu", "RotateRightSizeOnGpu::get_rotate_right_size_on_gpu"]
        349-359 trait IfThenElseSizeOnGpu ["IfThenElseSizeOnGpu::get_if_then_else_size_on_gpu", "IfThenElseSizeOnGpu::get_select_size_on_gpu", "IfThenElseSizeOnGpu::get_cmux_size_on_gpu"]
        361-369 trait RerandSizeOnGpu ["RerandSizeOnGpu::get_rerand_size_on_gpu"]
        371-396 merged MulSizeOnGpu ["MulSizeOnGpu", "MulSizeOnGpu::get_mul_size_on_gpu", "DivSizeOnGpu", "DivSizeOnGpu::get_div_size_on_gpu", "RemSizeOnGpu", "RemSizeOnGpu::get_rem_size_on_gpu", "DivRemSizeOnGpu", "DivRemSizeOnGpu::get_div_rem_size_on_gpu", "NegSizeOnGpu", "NegSizeOnGpu::get_neg_size_on_gpu", "FheEqSizeOnGpu", "FheEqSizeOnGpu::get_eq_size_on_gpu", "FheEqSizeOnGpu::get_ne_size_on_gpu"]
    "#]],
    );
}

#[test]
fn overloaded_methods_keep_one_symbol_and_distinct_ids() {
    let src = "class A {\n    void run() {\n        a();\n        b();\n        c();\n    }\n\n    void run(int n) {\n        a(n);\n        b(n);\n        c(n);\n    }\n}\n";
    let out = chunks("A.java", src, &ChunkParams { code_max_lines: 6, ..params() });
    let runs: Vec<_> = out.chunks.iter().filter(|c| c.symbol.as_deref() == Some("A.run")).collect();
    assert_eq!(runs.len(), 2, "{}", render(&out));
    let doc = atlas_stages::artifacts::DocEntry::new("s", "A.java", atlas_cache::Digest::of(b""));
    let cleaned = atlas_stages::artifacts::Cleaned { text: src.to_owned(), ..Default::default() };
    let recs = atlas_stages::chunk::chunk_document(&doc, &cleaned, &ChunkParams { code_max_lines: 6, ..params() });
    let ids: std::collections::BTreeSet<_> = recs.iter().map(|r| &r.chunk_id).collect();
    assert_eq!(ids.len(), recs.len(), "chunk ids are distinct");
}

#[test]
fn dump_dict_is_qualified_by_its_class_everywhere_in_concrete_ml() {
    let Some(root) = crate::corpora::corpora() else { return };
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for f in files(&root.join("concrete-ml/repo/src"), &["py"]) {
        let src = std::fs::read_to_string(&f).unwrap();
        let out = chunks(&f.display().to_string(), &src, &ChunkParams::default());
        for s in out.chunks.iter().flat_map(|c| c.symbol.iter().chain(&c.symbols)) {
            if s.ends_with("dump_dict") {
                *seen.entry(s.clone()).or_default() += 1;
            }
        }
    }
    assert!(seen.len() >= 10, "{seen:?}");
    for (sym, n) in &seen {
        let class = sym.strip_suffix(".dump_dict").unwrap_or_else(|| panic!("{sym} is not Class.dump_dict"));
        assert!(class.starts_with(|c: char| c.is_uppercase() || c == '_'), "{sym}");
        assert!(*n <= 2, "{sym} appears {n} times");
    }
}

/// The definitions a file holds, one line each: `start-end kind name (+ exported,
/// - not, nothing: unknown) | doc`.
fn render_defs(out: &CodeChunks) -> String {
    out.defs
        .iter()
        .map(|d| {
            format!(
                "{}-{} {} {}{}{}\n",
                d.start_line,
                d.end_line,
                d.kind,
                d.name,
                match d.exported {
                    Some(true) => " +",
                    Some(false) => " -",
                    None => "",
                },
                d.doc.as_ref().map_or(String::new(), |x| format!(" | {x}"))
            )
        })
        .collect()
}

#[test]
fn the_public_api_is_marked_as_each_language_declares_it() {
    let rust = r#"pub trait Shape { fn area(&self) -> f64; }
trait Hidden { fn secret(&self); }
pub(crate) fn internal() {}
pub struct Square;
impl Shape for Square { fn area(&self) -> f64 { 1.0 } }
impl Square { pub fn new() -> Self { Square } fn helper(&self) {} }
#[macro_export]
macro_rules! public_macro { () => {}; }
macro_rules! local_macro { () => {}; }
"#;
    expect![[r#"
        1-1 trait Shape +
        1-1 method Shape::area +
        2-2 trait Hidden -
        2-2 method Hidden::secret -
        3-3 function internal -
        4-4 struct Square +
        5-5 method Square::area +
        6-6 method Square::helper -
        6-6 method Square::new +
        8-8 macro public_macro! +
        9-9 macro local_macro! -
    "#]]
    .assert_eq(&render_defs(&chunks("r/src/lib.rs", rust, &ChunkParams::default())));
    let python = "class Model:\n    def fit(self): pass\n    def _prep(self): pass\n    def __init__(self): pass\ndef _helper(): pass\n";
    expect![[r#"
        1-4 class Model +
        2-2 method Model.fit +
        3-3 method Model._prep -
        4-4 method Model.__init__ +
        5-5 function _helper -
    "#]]
    .assert_eq(&render_defs(&chunks("p/pkg/model.py", python, &ChunkParams::default())));
    expect![[r#"
        1-4 class Model -
        2-2 method Model.fit -
        3-3 method Model._prep -
        4-4 method Model.__init__ -
        5-5 function _helper -
    "#]]
    .assert_eq(&render_defs(&chunks("p/pkg/_impl.py", python, &ChunkParams::default())));
    let ts = "export class Client {\n  send(): void {}\n  private retry(): void {}\n}\nfunction local(): void {}\nexport function connect(): void {}\n";
    expect![[r#"
        1-4 class Client +
        2-2 method Client.send +
        3-3 method Client.retry -
        5-5 function local -
        6-6 function connect +
    "#]]
    .assert_eq(&render_defs(&chunks("n/src/client.ts", ts, &ChunkParams::default())));
    let commonjs = "function parse(s) { return s; }\nmodule.exports = { parse };\n";
    expect![[r#"
        1-1 function parse
    "#]]
    .assert_eq(&render_defs(&chunks("n/index.js", commonjs, &ChunkParams::default())));
    let go = "package x\n\nfunc Open() {}\nfunc close() {}\n";
    expect![[r#"
        3-3 function Open +
        4-4 function close -
    "#]]
    .assert_eq(&render_defs(&chunks("g/x.go", go, &ChunkParams::default())));
    let java = "public class Api {\n  public void run() {}\n  void hidden() {}\n}\ninterface Cb { void call(); }\n";
    expect![[r#"
        1-4 class Api +
        2-2 method Api.run +
        3-3 method Api.hidden -
        5-5 interface Cb -
        5-5 method Cb.call +
    "#]]
    .assert_eq(&render_defs(&chunks("j/Api.java", java, &ChunkParams::default())));
}

#[test]
fn the_parse_records_every_definition_with_its_lines_and_doc_comment() {
    let rust = r#"//! Module doc.

/// The most rows a scan reads.
pub const EXACT_MAX_ROWS: usize = 64_000;
static COUNTER: u32 = 0;

/// Builds keys.
#[derive(Debug)]
pub struct KeyBuilder {
    parts: Vec<u8>,
}

impl KeyBuilder {
    /// A new builder.
    pub fn new() -> Self {
        KeyBuilder { parts: Vec::new() }
    }
    const LIMIT: usize = 3;
}

macro_rules! twice { ($e:expr) => { $e; $e }; }

mod inner {
    pub fn helper() -> u8 { super::EXACT_MAX_ROWS as u8 }
}

fn uses() {
    let b = KeyBuilder::new();
    twice!(inner::helper());
}
"#;
    let out = chunks("r/src/lib.rs", rust, &ChunkParams::default());
    expect![[r#"
        4-4 const EXACT_MAX_ROWS + | The most rows a scan reads.
        5-5 static COUNTER -
        9-11 struct KeyBuilder + | Builds keys.
        15-17 method KeyBuilder::new + | A new builder.
        18-18 const KeyBuilder::LIMIT -
        21-21 macro twice! -
        23-25 mod inner -
        24-24 function inner::helper +
        27-30 function uses -
    "#]]
    .assert_eq(&render_defs(&out));
    // Uses, not definitions: `KeyBuilder` and `new` on line 28, `helper` on 29.
    assert!(out.refs.contains(&("KeyBuilder".to_owned(), 28)), "{:?}", out.refs);
    assert!(out.refs.contains(&("new".to_owned(), 28)));
    assert!(out.refs.contains(&("helper".to_owned(), 29)));
    assert!(!out.refs.contains(&("KeyBuilder".to_owned(), 9)), "the defining line is not a use");

    let python = r#"DEFAULT_BITS = 8

class Model:
    """A model.

    More text."""
    SCALE = 2

    def fit(self, x):
        """Fit it."""
        return helper(x)

def helper(x):
    return x * DEFAULT_BITS
"#;
    let out = chunks("p/src/m.py", python, &ChunkParams::default());
    expect![[r#"
        1-1 variable DEFAULT_BITS +
        3-11 class Model + | A model.
        7-7 variable Model.SCALE +
        9-11 method Model.fit + | Fit it.
        13-14 function helper +
    "#]]
    .assert_eq(&render_defs(&out));
    assert!(out.refs.contains(&("helper".to_owned(), 11)));
    assert!(out.refs.contains(&("DEFAULT_BITS".to_owned(), 14)));
}
