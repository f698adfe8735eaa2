//! The rules for single tools.json values that other formats share (`import`, `tool add`,
//! manifest pins): tool ids, exec commands, http URLs with `{name}` templates.

/// What an invalid tool id is told to look like.
pub const ID_HELP: &str = "ids are 1-64 characters: lowercase letters, digits, `_` and `-`, in dot-separated segments that start with a letter, e.g. `mail.smtp_send`";

/// Tool ids: 1-64 characters, `^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$`.
pub fn check_tool_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 64 {
        return Err(format!("tool id `{id}` must be 1 to 64 characters long (it has {})", id.chars().count()));
    }
    for segment in id.split('.') {
        let ok = segment.starts_with(|c: char| c.is_ascii_lowercase())
            && segment.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !ok {
            return Err(if segment.is_empty() {
                format!("tool id `{id}` has an empty segment")
            } else {
                format!("tool id `{id}` has an invalid segment `{segment}`")
            });
        }
    }
    Ok(())
}

/// Exec commands: an absolute path to a file.
pub fn check_command(cmd: &str) -> Result<(), String> {
    if !cmd.starts_with('/') {
        return Err(format!("command `{cmd}` is not an absolute path"));
    }
    if cmd.ends_with('/') || cmd.chars().any(char::is_control) {
        return Err(format!("command `{cmd}` is not a path to a file"));
    }
    Ok(())
}

/// Checks an http(s) URL with `{name}` templates; returns the template names.
pub fn check_url(url: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut concrete = String::with_capacity(url.len());
    let mut chars = url.char_indices();
    while let Some((_, c)) = chars.next() {
        match c {
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    name.push(c);
                }
                let valid = closed
                    && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    return Err(format!("url `{url}` has a malformed template `{{{name}`; templates are `{{name}}`"));
                }
                names.push(name);
                concrete.push('x');
            }
            '}' => return Err(format!("url `{url}` has a `}}` without a matching `{{`")),
            c if c.is_whitespace() || c.is_control() => {
                return Err(format!("url `{url}` contains whitespace or control characters"));
            }
            c => concrete.push(c),
        }
    }
    let uri = fluent_uri::Uri::parse(concrete.as_str())
        .map_err(|e| format!("url `{url}` is not a valid absolute URL: {e}"))?;
    let scheme = uri.scheme().as_str();
    if scheme != "http" && scheme != "https" {
        return Err(format!("url `{url}` must use http:// or https://, not `{scheme}:`"));
    }
    match uri.authority() {
        Some(a) if !a.host().is_empty() => Ok(names),
        _ => Err(format!("url `{url}` has no host")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_ids() {
        assert!(check_tool_id("mail.smtp_send").is_ok());
        assert!(check_tool_id("a-b.c2").is_ok());
        for bad in ["", "Mail", "1a", "a..b", "a.", ".a", "a b", &"a".repeat(65)] {
            assert!(check_tool_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(check_url("https://api.x.com/m/{box}/send").unwrap(), vec!["box"]);
        assert!(check_url("/send").is_err());
        assert!(check_url("ftp://x.com").is_err());
        assert!(check_url("https://x.com/{a").is_err());
        assert!(check_url("https://x.com/a}").is_err());
        assert!(check_url("https:///path").is_err());
    }
}
