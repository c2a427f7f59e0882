//! robots.txt per RFC 9309: the group for our product token (else `*`), longest-match
//! allow/disallow with `*` and `$`, allow winning ties. How the file was answered
//! decides the default: a 4xx allows everything, a 5xx or no answer disallows all.

/// At least this much of a robots.txt is parsed (RFC 9309 asks for 500 KiB).
pub const MAX_ROBOTS_BYTES: usize = 512 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Robots {
    AllowAll,
    /// The server failed (5xx) or did not answer: nothing may be fetched.
    DisallowAll(String),
    Rules(Vec<Rule>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    pub pattern: String,
}

impl Robots {
    /// Parses a robots.txt body for the product token `agent` (e.g. `atlas`).
    pub fn parse(body: &str, agent: &str) -> Robots {
        let body = &body[..atlas_runtime::utf8::floor_char_boundary(body, MAX_ROBOTS_BYTES)];
        let agent = agent.to_ascii_lowercase();
        // Groups: consecutive user-agent lines, then rules.
        let mut groups: Vec<(Vec<String>, Vec<Rule>)> = Vec::new();
        let mut in_agents = false;
        for raw in body.lines() {
            let line = raw.split('#').next().unwrap_or_default().trim();
            let Some((key, value)) = line.split_once(':') else { continue };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            match key.as_str() {
                "user-agent" => {
                    if !in_agents {
                        groups.push((Vec::new(), Vec::new()));
                        in_agents = true;
                    }
                    if let Some(g) = groups.last_mut() {
                        g.0.push(value.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    in_agents = false;
                    if let Some(g) = groups.last_mut()
                        && !(key == "disallow" && value.is_empty())
                    {
                        g.1.push(Rule { allow: key == "allow", pattern: value.to_owned() });
                    }
                }
                _ => {}
            }
        }
        let mine: Vec<Rule> = groups
            .iter()
            .filter(|(agents, _)| agents.iter().any(|a| a == &agent))
            .flat_map(|(_, r)| r.clone())
            .collect();
        let rules = if mine.is_empty() {
            groups.iter().filter(|(agents, _)| agents.iter().any(|a| a == "*")).flat_map(|(_, r)| r.clone()).collect()
        } else {
            mine
        };
        Robots::Rules(rules)
    }

    /// May `path` (with its query) be fetched?
    pub fn allows(&self, path: &str) -> bool {
        match self {
            Robots::AllowAll => true,
            Robots::DisallowAll(_) => false,
            Robots::Rules(rules) => {
                if path == "/robots.txt" {
                    return true;
                }
                let mut best: Option<(usize, bool)> = None;
                for r in rules {
                    if matches(&r.pattern, path) {
                        let len = r.pattern.len();
                        best = match best {
                            Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                            _ => Some((len, r.allow)),
                        };
                    }
                }
                best.is_none_or(|(_, allow)| allow)
            }
        }
    }
}

/// RFC 9309 matching: `*` is any run of characters, a trailing `$` anchors the end;
/// otherwise the pattern matches a prefix of the path.
fn matches(pattern: &str, path: &str) -> bool {
    let glob = match pattern.strip_suffix('$') {
        Some(p) => p.to_owned(),
        None => format!("{pattern}*"),
    };
    glob_match(glob.as_bytes(), path.as_bytes())
}

/// `*`-only glob matching with backtracking to the last star (linear in practice).
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_match_wins_and_allow_wins_ties() {
        let r = Robots::parse(
            "User-agent: *\nDisallow: /private\nAllow: /private/open\nDisallow: /*.pdf$\n\nUser-agent: other\nDisallow: /\n",
            "atlas",
        );
        assert!(r.allows("/docs/a.md"));
        assert!(!r.allows("/private/x"));
        assert!(r.allows("/private/open/x"));
        assert!(!r.allows("/files/a.pdf"));
        assert!(r.allows("/files/a.pdf?x=1"));
    }

    #[test]
    fn our_group_replaces_the_star_group() {
        let r = Robots::parse("User-agent: *\nDisallow: /\n\nUser-agent: Atlas\nUser-agent: foo\nAllow: /\n", "atlas");
        assert!(r.allows("/anything"));
        let r = Robots::parse("User-agent: *\nDisallow: /\n", "atlas");
        assert!(!r.allows("/anything"));
        assert!(r.allows("/robots.txt"));
    }

    #[test]
    fn empty_disallow_allows_everything() {
        assert!(Robots::parse("User-agent: *\nDisallow:\n", "atlas").allows("/x"));
    }
}
