//! The tree-sitter grammars Atlas knows: the chunker parses code with them and the
//! web page highlights it with the same ones (each grammar's own highlight query).
//! One table, so a language the chunker reads is one the page colours (TSX included).
//! A crate of its own, below both, so the grammars' C sources build beside the runtime.

use tree_sitter::Language;

/// A grammar: the name a highlighter keys it by, the parser's language and the
/// grammar's highlight query.
#[derive(Debug, Clone)]
pub struct Grammar {
    /// One of [`NAMES`]: `python`, `rust`, `javascript`, `typescript`, `tsx`, `go`,
    /// `java`, `c`, `cpp`, `csharp`, `ruby`, `php`, `kotlin`, `swift`, `scala`, `bash`
    /// or `lua`.
    pub name: &'static str,
    pub language: Language,
    pub highlights: String,
}

/// The grammars in the table, by name.
pub const NAMES: &[&str] = &[
    "python",
    "rust",
    "javascript",
    "typescript",
    "tsx",
    "go",
    "java",
    "c",
    "cpp",
    "csharp",
    "ruby",
    "php",
    "kotlin",
    "swift",
    "scala",
    "bash",
    "lua",
];

/// The grammar of a language (the name `language_of` gives a file), TSX for a
/// `.tsx` file, Bash for `shell`.
pub fn of(language: &str, path: &str) -> Option<Grammar> {
    let name = match language {
        "typescript" if path.ends_with(".tsx") => "tsx",
        "shell" => "bash",
        other => other,
    };
    by_name(name)
}

/// A grammar by its table name.
pub fn by_name(name: &str) -> Option<Grammar> {
    // TypeScript's query extends JavaScript's (it holds only what TypeScript adds).
    let ts = || format!("{}\n{}", tree_sitter_typescript::HIGHLIGHTS_QUERY, tree_sitter_javascript::HIGHLIGHT_QUERY);
    let (name, language, highlights): (&'static str, Language, String) = match name {
        "python" => ("python", tree_sitter_python::LANGUAGE.into(), tree_sitter_python::HIGHLIGHTS_QUERY.into()),
        "rust" => ("rust", tree_sitter_rust::LANGUAGE.into(), tree_sitter_rust::HIGHLIGHTS_QUERY.into()),
        "javascript" => {
            ("javascript", tree_sitter_javascript::LANGUAGE.into(), tree_sitter_javascript::HIGHLIGHT_QUERY.into())
        }
        "typescript" => ("typescript", tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(), ts()),
        "tsx" => ("tsx", tree_sitter_typescript::LANGUAGE_TSX.into(), ts()),
        "go" => ("go", tree_sitter_go::LANGUAGE.into(), tree_sitter_go::HIGHLIGHTS_QUERY.into()),
        "java" => ("java", tree_sitter_java::LANGUAGE.into(), tree_sitter_java::HIGHLIGHTS_QUERY.into()),
        "c" => ("c", tree_sitter_c::LANGUAGE.into(), tree_sitter_c::HIGHLIGHT_QUERY.into()),
        // C++'s query, like TypeScript's, holds only what it adds to C's.
        "cpp" => (
            "cpp",
            tree_sitter_cpp::LANGUAGE.into(),
            format!("{}\n{}", tree_sitter_cpp::HIGHLIGHT_QUERY, tree_sitter_c::HIGHLIGHT_QUERY),
        ),
        "csharp" => ("csharp", tree_sitter_c_sharp::LANGUAGE.into(), tree_sitter_c_sharp::HIGHLIGHTS_QUERY.into()),
        "ruby" => ("ruby", tree_sitter_ruby::LANGUAGE.into(), tree_sitter_ruby::HIGHLIGHTS_QUERY.into()),
        "php" => ("php", tree_sitter_php::LANGUAGE_PHP.into(), tree_sitter_php::HIGHLIGHTS_QUERY.into()),
        // The Kotlin crate ships no highlight query: its code is shown uncoloured.
        "kotlin" => ("kotlin", tree_sitter_kotlin_ng::LANGUAGE.into(), String::new()),
        "swift" => ("swift", tree_sitter_swift::LANGUAGE.into(), tree_sitter_swift::HIGHLIGHTS_QUERY.into()),
        "scala" => ("scala", tree_sitter_scala::LANGUAGE.into(), tree_sitter_scala::HIGHLIGHTS_QUERY.into()),
        "bash" => ("bash", tree_sitter_bash::LANGUAGE.into(), tree_sitter_bash::HIGHLIGHT_QUERY.into()),
        "lua" => ("lua", tree_sitter_lua::LANGUAGE.into(), tree_sitter_lua::HIGHLIGHTS_QUERY.into()),
        _ => return None,
    };
    Some(Grammar { name, language, highlights })
}
