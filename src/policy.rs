//! policy.caps: the capabilities an agent is granted, and whether a grant covers what a tool
//! requires (seed §3: "any missing grant denies the attachment outright").
//!
//! Format: one grant per line (`family:scope`), `#` comments, blank lines ignored. See
//! docs/book/src/reference/tools-json.md for the matching rules.

use crate::diagnostic::{Code, Diagnostic, Source};

pub const FILE_NAME: &str = "policy.caps";

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

    /// Whether this grant covers the `required` capability.
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

/// One grant and the line it came from.
#[derive(Debug, Clone)]
pub struct Grant {
    pub capability: Capability,
    pub line: usize,
}

/// The parsed policy.caps.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub grants: Vec<Grant>,
}

impl Policy {
    /// Parses policy.caps, reporting bad lines and repeated grants.
    pub fn parse(source: &Source, diagnostics: &mut Vec<Diagnostic>) -> Policy {
        let mut grants: Vec<Grant> = Vec::new();
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
            match Capability::parse(trimmed) {
                Ok(capability) => {
                    if let Some(first) = grants.iter().find(|g| g.capability == capability) {
                        diagnostics.push(
                            Diagnostic::warning(
                                Code::DuplicateGrant,
                                &source.name,
                                format!("`{capability}` is already granted on line {}", first.line),
                            )
                            .at_path(format!("line:{line}"))
                            .at_span(source, span)
                            .with_help("remove the repeated line"),
                        );
                    } else {
                        grants.push(Grant { capability, line });
                    }
                }
                Err(why) => diagnostics.push(
                    Diagnostic::error(Code::InvalidGrant, &source.name, why)
                        .at_path(format!("line:{line}"))
                        .at_span(source, span)
                        .with_help("write one grant per line as `family:scope`, e.g. `net:api.example.com`; `#` starts a comment"),
                ),
            }
        }
        Policy { grants }
    }

    /// The first grant covering `required`, if any.
    pub fn grant_for(&self, required: &Capability) -> Option<&Grant> {
        self.grants.iter().find(|g| g.capability.covers(required))
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
    fn parse_reports_bad_lines_and_duplicates() {
        let src = Source::new("policy.caps", "# grants\nnet:a.com # mail\n\nnet\nnet:a.com\n");
        let mut d = Vec::new();
        let p = Policy::parse(&src, &mut d);
        assert_eq!(p.grants.len(), 1);
        let codes: Vec<_> = d.iter().map(|d| (d.code, d.path.clone().unwrap())).collect();
        assert_eq!(codes, vec![(Code::InvalidGrant, "line:4".into()), (Code::DuplicateGrant, "line:5".into())]);
    }
}
