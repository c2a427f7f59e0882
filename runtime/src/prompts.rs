//! Task templates a bundle ships (`stages.pack.prompts`): the rag server offers them
//! beside its own prompts, and `atlas agent --task NAME` runs them. Checked when the
//! bundle is built and again when it is read (a bundle is untrusted input): names,
//! counts and sizes bounded, every `{placeholder}` a declared argument. Their text is
//! bundle-derived, so it reaches an agent or an LLM only fenced.
//!
//! `prompts.json`: a JSON array of [`BundlePrompt`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The file in the bundle.
pub const FILE: &str = "prompts.json";
/// The most prompts one bundle ships.
pub const MAX_PROMPTS: usize = 32;
/// The most arguments one prompt takes.
pub const MAX_ARGUMENTS: usize = 8;
/// The longest template, in bytes.
pub const MAX_TEXT_BYTES: usize = 8 << 10;
/// The longest description, in bytes.
const MAX_DESCRIPTION_BYTES: usize = 300;
/// The largest `prompts.json` read, in bytes: every set [`check`] accepts, as the pack
/// stage writes it. JSON spells a control character in up to 6 bytes, so each text and
/// description counts 6 times; 1 KiB a prompt and an argument holds the names, keys and
/// indentation (2.3 MiB in all; a set of plain text is a few hundred KiB).
pub const MAX_FILE_BYTES: u64 = (MAX_PROMPTS
    * (6 * (MAX_TEXT_BYTES + (1 + MAX_ARGUMENTS) * MAX_DESCRIPTION_BYTES) + (1 + MAX_ARGUMENTS) * 1024))
    as u64;
/// The longest value one argument takes when the template is filled, in bytes.
pub const MAX_VALUE_BYTES: usize = 2 << 10;
/// The names Atlas's own prompts hold (a bundle cannot shadow them).
pub const RESERVED: &[&str] = &["answer_with_citations", "explain_symbol", "compare_versions", "find_in_docs"];

/// One task template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundlePrompt {
    /// `[a-z][a-z0-9_]*`, at most 64 bytes.
    pub name: String,
    /// One line.
    pub description: String,
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
    /// The template: `{argument}` is replaced by the argument's value.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgument {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
}

fn is_name(s: &str) -> bool {
    s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The `{name}` placeholders of `text`, in order (`{{` and `}}` are literal braces).
fn placeholders(text: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err("a lone `}` (write `}}` for a brace)".into());
        }
        let end = tail.find('}').ok_or("a `{` without its `}` (write `{{` for a brace)")?;
        out.push(&tail[1..end]);
        rest = &tail[end + 1..];
    }
    Ok(out)
}

/// Checks a bundle's prompts: every rule above, each failure naming the prompt.
pub fn check(prompts: &[BundlePrompt]) -> Result<(), String> {
    if prompts.len() > MAX_PROMPTS {
        return Err(format!("{} prompts, at most {MAX_PROMPTS}", prompts.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for p in prompts {
        let name = &p.name;
        let bad = |why: String| Err(format!("prompt {name:?}: {why}"));
        if !is_name(name) {
            return bad("a name is lowercase letters, digits and `_`, starting with a letter, at most 64 bytes".into());
        }
        if RESERVED.contains(&name.as_str()) {
            return bad("Atlas's own prompt has this name; choose another".into());
        }
        if !seen.insert(name.as_str()) {
            return bad("named twice".into());
        }
        if p.description.len() > MAX_DESCRIPTION_BYTES || p.description.contains(['\n', '\r']) {
            return bad(format!("the description must be one line of at most {MAX_DESCRIPTION_BYTES} bytes"));
        }
        if p.text.trim().is_empty() || p.text.len() > MAX_TEXT_BYTES {
            return bad(format!("the text must hold 1 to {MAX_TEXT_BYTES} bytes"));
        }
        if p.arguments.len() > MAX_ARGUMENTS {
            return bad(format!("{} arguments, at most {MAX_ARGUMENTS}", p.arguments.len()));
        }
        let mut args = std::collections::BTreeSet::new();
        for a in &p.arguments {
            if !is_name(&a.name) || !args.insert(a.name.as_str()) {
                return bad(format!("argument {:?}: a unique name of lowercase letters, digits and `_`", a.name));
            }
            if a.description.len() > MAX_DESCRIPTION_BYTES || a.description.contains(['\n', '\r']) {
                return bad(format!("argument {:?}: the description must be one short line", a.name));
            }
        }
        for ph in placeholders(&p.text).map_err(|e| format!("prompt {name:?}: {e}"))? {
            if !args.contains(ph) {
                return bad(format!("the text uses {{{ph}}}, which is not one of its arguments"));
            }
        }
    }
    Ok(())
}

/// Reads `prompts.json` (already checked against the manifest): parsed and checked.
pub fn from_bytes(bytes: &[u8]) -> Result<Vec<BundlePrompt>, String> {
    let prompts: Vec<BundlePrompt> = serde_json::from_slice(bytes).map_err(|e| format!("not a prompt list ({e})"))?;
    check(&prompts)?;
    Ok(prompts)
}

impl BundlePrompt {
    /// The template with `values` filled in: a required argument missing, an unknown
    /// one, or a value over [`MAX_VALUE_BYTES`] is the error.
    pub fn fill(&self, values: &BTreeMap<String, String>) -> Result<String, String> {
        for k in values.keys() {
            if !self.arguments.iter().any(|a| &a.name == k) {
                return Err(format!("{} takes no argument {k:?}", self.name));
            }
        }
        for a in &self.arguments {
            match values.get(&a.name) {
                None if a.required => return Err(format!("{} needs the argument {:?}", self.name, a.name)),
                Some(v) if v.len() > MAX_VALUE_BYTES => {
                    return Err(format!("the argument {:?} is over {MAX_VALUE_BYTES} bytes", a.name));
                }
                _ => {}
            }
        }
        let mut out = String::with_capacity(self.text.len());
        let mut rest = self.text.as_str();
        while let Some(i) = rest.find(['{', '}']) {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push_str(&tail[..1]);
                rest = &tail[2..];
                continue;
            }
            let end = tail.find('}').ok_or("unbalanced braces")?;
            out.push_str(values.get(&tail[1..end]).map_or("", String::as_str));
            rest = &tail[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(name: &str, text: &str, args: &[&str]) -> BundlePrompt {
        BundlePrompt {
            name: name.into(),
            description: "d".into(),
            arguments: args
                .iter()
                .map(|a| PromptArgument { name: (*a).into(), description: String::new(), required: true })
                .collect(),
            text: text.into(),
        }
    }

    #[test]
    fn the_largest_prompt_set_check_accepts_fits_the_file_limit() {
        // Control characters: 6 bytes each in JSON, the worst a byte can grow.
        let worst = |n: usize| "\u{1}".repeat(n);
        let name = |i: usize| format!("p{i:02}{}", "x".repeat(61));
        let set: Vec<BundlePrompt> = (0..MAX_PROMPTS)
            .map(|i| BundlePrompt {
                name: name(i),
                description: worst(MAX_DESCRIPTION_BYTES),
                arguments: (0..MAX_ARGUMENTS)
                    .map(|j| PromptArgument {
                        name: name(j),
                        description: worst(MAX_DESCRIPTION_BYTES),
                        required: true,
                    })
                    .collect(),
                text: worst(MAX_TEXT_BYTES),
            })
            .collect();
        check(&set).unwrap();
        let written = serde_json::to_vec_pretty(&set).unwrap().len() as u64;
        assert!(written <= MAX_FILE_BYTES, "{written} bytes, over {MAX_FILE_BYTES}");
        assert!(written * 5 > MAX_FILE_BYTES * 4, "the limit is close to the worst case: {written}");
    }

    #[test]
    fn prompts_are_checked_and_filled() {
        let p = prompt("migrate", "From {from} to {to}; keep {{braces}}.", &["from", "to"]);
        check(std::slice::from_ref(&p)).unwrap();
        let v = BTreeMap::from([("from".to_owned(), "1.0".to_owned()), ("to".to_owned(), "2.0".to_owned())]);
        assert_eq!(p.fill(&v).unwrap(), "From 1.0 to 2.0; keep {braces}.");
        assert!(p.fill(&BTreeMap::new()).unwrap_err().contains("needs the argument"));
        for (bad, why) in [
            (prompt("Bad", "x", &[]), "a name is"),
            (prompt("explain_symbol", "x", &[]), "Atlas's own"),
            (prompt("a", "uses {nope}", &[]), "not one of its arguments"),
            (prompt("a", "a { b", &[]), "without its"),
            (prompt("a", "", &[]), "the text must"),
            (prompt("a", &"x".repeat(MAX_TEXT_BYTES + 1), &[]), "the text must"),
        ] {
            let e = check(&[bad]).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        assert!(check(&[p.clone(), p]).unwrap_err().contains("named twice"));
        assert!(from_bytes(b"{}").is_err());
    }
}
