//! policy.caps: the capabilities an agent is granted, and whether a grant covers what a tool
//! requires (seed §3: "any missing grant denies the attachment outright").
//!
//! Format: one grant per line (`family:scope`), `#` comments, blank lines ignored. See
//! docs/book/src/reference/tools-json.md for the matching rules.

use std::collections::HashMap;

use crate::diagnostic::{Code, Diagnostic, MAX_REPORTED, Source};

pub const FILE_NAME: &str = crate::entries::POLICY;

/// A capability string split into its family and scope, e.g. `net` and `api.mail.example`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Capability {
    pub family: String,
    pub scope: String,
}

impl Capability {
    /// Parses `family:scope`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Capability, String> {
        let Some((family, scope)) = text.split_once(':') else {
            return Err(format!("`{text}` is not of the form `family:scope`"));
        };
        let family_ok = family.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && family.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !family_ok {
            return Err(format!(
                "capability family `{family}` must start with a lowercase letter and use only a-z, 0-9, `_` and `-`"
            ));
        }
        if scope.is_empty() {
            return Err(format!("capability `{text}` has an empty scope"));
        }
        if let Some(c) = scope.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(format!(
                "capability scope `{scope}` contains {}; scopes are printable ASCII without spaces",
                describe_char(c)
            ));
        }
        Ok(Capability { family: family.to_owned(), scope: scope.to_owned() })
    }

    /// Whether this grant covers the `required` capability: the matching rules, which
    /// [`GrantIndex`] implements by lookup and is tested against.
    #[cfg(test)]
    pub fn covers(&self, required: &Capability) -> bool {
        if self.family != required.family {
            return false;
        }
        let (grant, need) = (self.scope.as_str(), required.scope.as_str());
        if grant == need || grant == "*" {
            return true;
        }
        if let Some(suffix) = grant.strip_prefix('*')
            && suffix.starts_with('.')
        {
            return need.len() > suffix.len() && need.ends_with(suffix);
        }
        if let Some(prefix) = grant.strip_suffix('*')
            && prefix.ends_with('/')
        {
            return need.starts_with(prefix) && need.len() > prefix.len();
        }
        false
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.family, self.scope)
    }
}

fn describe_char(c: char) -> String {
    if c == ' ' { "a space".to_owned() } else { format!("the character U+{:04X}", c as u32) }
}

/// One grant.
#[derive(Debug, Clone)]
pub struct Grant {
    pub capability: Capability,
}

/// The parsed policy.caps.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub grants: Vec<Grant>,
    index: GrantIndex,
}

impl Policy {
    /// Parses policy.caps, reporting bad lines and repeated grants (at most 100 of them, then
    /// a count).
    pub fn parse(source: &Source, diagnostics: &mut Vec<Diagnostic>) -> Policy {
        let mut grants: Vec<Grant> = Vec::new();
        let mut first_line: HashMap<Capability, usize> = HashMap::new();
        let mut shown = 0;
        let mut hidden = (0, 0);
        let mut offset = 0;
        for (index, raw_line) in source.text.split_inclusive('\n').enumerate() {
            let line_start = offset;
            offset += raw_line.len();
            let content = strip_comment(raw_line.trim_end_matches(['\n', '\r']));
            let trimmed = content.trim();
            if trimmed.is_empty() {
                continue;
            }
            let start = line_start + (content.len() - content.trim_start().len());
            let span = start..start + trimmed.len();
            let line = index + 1;
            let problem = match Capability::parse(trimmed) {
                Ok(capability) => match first_line.get(&capability) {
                    Some(first) => Diagnostic::warning(
                        Code::DuplicateGrant,
                        &source.name,
                        format!("`{capability}` is already granted on line {first}"),
                    )
                    .with_help("remove the repeated line"),
                    None => {
                        first_line.insert(capability.clone(), line);
                        grants.push(Grant { capability });
                        continue;
                    }
                },
                Err(why) => Diagnostic::error(Code::InvalidGrant, &source.name, why).with_help(
                    "write one grant per line as `family:scope`, e.g. `net:api.example.com`; `#` starts a comment",
                ),
            };
            if shown >= MAX_REPORTED {
                if problem.is_error() {
                    hidden.0 += 1
                } else {
                    hidden.1 += 1
                }
                continue;
            }
            shown += 1;
            diagnostics.push(problem.at_path(format!("line:{line}")).at_span(source, span));
        }
        if let Some(d) = crate::diagnostic::hidden_summary(&source.name, hidden) {
            diagnostics.push(d);
        }
        let index = GrantIndex::new(grants.iter().map(|g| &g.capability));
        Policy { grants, index }
    }

    /// The first grant covering `required`, if any.
    pub fn grant_for(&self, required: &Capability) -> Option<&Grant> {
        self.index.first_covering(required).map(|i| &self.grants[i])
    }
}

/// Which of a list of grants covers a capability, in time linear in the capability's length
/// rather than in the number of grants: each rule of [`Capability::covers`] names the only
/// grant scopes that can match (the scope itself, `*`, `*` + a `.suffix` of it, a `prefix/` of
/// it + `*`), and each is looked up in a map.
#[derive(Debug, Clone, Default)]
pub struct GrantIndex {
    /// family -> scope -> the first grant's position (looked up by `&str`, nothing allocated).
    scopes: HashMap<String, HashMap<String, usize>>,
}

impl GrantIndex {
    pub fn new<'c>(grants: impl IntoIterator<Item = &'c Capability>) -> Self {
        let mut scopes: HashMap<String, HashMap<String, usize>> = HashMap::new();
        for (i, g) in grants.into_iter().enumerate() {
            scopes.entry(g.family.clone()).or_default().entry(g.scope.clone()).or_insert(i);
        }
        GrantIndex { scopes }
    }

    /// The position of the first grant covering `need`.
    pub fn first_covering(&self, need: &Capability) -> Option<usize> {
        let scopes = self.scopes.get(need.family.as_str())?;
        let scope = need.scope.as_str();
        let look = |s: &str| scopes.get(s).copied();
        let mut best = [look(scope), look("*")].into_iter().flatten().min();
        let mut consider = |found: Option<usize>| {
            if let Some(i) = found {
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        };
        // One buffer for the wildcard scopes looked up.
        let mut wild = String::with_capacity(scope.len() + 1);
        for (i, c) in scope.char_indices() {
            // `*.x.com` covers `a.x.com`: a non-empty part before the suffix.
            if c == '.' && i > 0 {
                wild.clear();
                wild.push('*');
                wild.push_str(&scope[i..]);
                consider(look(&wild));
            }
            // `/data/*` covers `/data/kb`: something after the prefix.
            if c == '/' && i + 1 < scope.len() {
                wild.clear();
                wild.push_str(&scope[..=i]);
                wild.push('*');
                consider(look(&wild));
            }
        }
        best
    }
}

/// Removes a `#` comment: at the start of the line or after whitespace.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()) {
            return &line[..i];
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(s: &str) -> Capability {
        Capability::parse(s).unwrap()
    }

    #[test]
    fn matching_rules() {
        assert!(cap("net:api.x.com").covers(&cap("net:api.x.com")));
        assert!(cap("net:*").covers(&cap("net:anything")));
        assert!(cap("net:*.x.com").covers(&cap("net:api.x.com")));
        assert!(!cap("net:*.x.com").covers(&cap("net:x.com")));
        assert!(!cap("net:*.x.com").covers(&cap("net:evilx.com")));
        assert!(cap("fs:/data/*").covers(&cap("fs:/data/kb/i")));
        assert!(!cap("fs:/data/*").covers(&cap("fs:/database")));
        assert!(!cap("fs:*").covers(&cap("net:x")));
    }

    #[test]
    fn the_index_finds_the_first_covering_grant_like_a_scan() {
        let grants: Vec<Capability> =
            ["net:x", "net:*.x.com", "fs:/data/*", "net:*", "net:api.x.com", "fs:/data/kb/*", "fs:*.a", "net:*.com"]
                .into_iter()
                .map(cap)
                .collect();
        let index = GrantIndex::new(&grants);
        for need in [
            "net:api.x.com",
            "net:x.com",
            "fs:/data/kb/i",
            "fs:/data/",
            "fs:/database",
            "fs:b.a",
            "net:.com",
            "mail:x",
            "fs:/data/kb/",
        ] {
            let need = cap(need);
            let scan = grants.iter().position(|g| g.covers(&need));
            assert_eq!(index.first_covering(&need), scan, "{need}");
            let later = GrantIndex::new(&grants[1..]);
            assert_eq!(later.first_covering(&need), grants[1..].iter().position(|g| g.covers(&need)), "{need}");
        }
    }

    #[test]
    fn parse_reports_bad_lines_and_duplicates() {
        let src = Source::new("policy.caps", "# grants\nnet:a.com # mail\n\nnet\nnet:a.com\n");
        let mut d = Vec::new();
        let p = Policy::parse(&src, &mut d);
        assert_eq!(p.grants.len(), 1);
        let codes: Vec<_> = d.iter().map(|d| (d.code, d.path.clone().unwrap())).collect();
        assert_eq!(codes, vec![(Code::InvalidGrant, "line:4".into()), (Code::DuplicateGrant, "line:5".into())]);
    }
}
