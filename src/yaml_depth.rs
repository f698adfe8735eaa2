//! A bound on YAML nesting found without parsing: the YAML parser takes time quadratic in the
//! nesting depth, so every YAML input (Rune descriptors, SKILL.md front matter) is measured
//! first and refused (`limit_exceeded`) when it could nest deeper than its cap.

/// Where a YAML text may nest deeper than `limit`, found without parsing, or `None`. The bound
/// over-counts rather than under-counts: every `[` and `{` opens a level (quoted or not, until
/// its `]` or `}`), every indentation level of block lines is one, and so is every `- `, `? ` and
/// `: ` on a line (compact nesting such as `- - - x`).
pub fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut flow = 0usize;
    let mut indents: Vec<usize> = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let content = line.trim_start_matches(' ');
        let bytes = content.trim_end().as_bytes();
        if bytes.is_empty() || bytes[0] == b'#' {
            continue;
        }
        let indent = line.len() - content.len();
        if flow == 0 {
            while indents.last().is_some_and(|&top| top >= indent) {
                indents.pop();
            }
            indents.push(indent);
        }
        let mut indicators = 0;
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'#' if i > 0 && bytes[i - 1] == b' ' => break,
                b'[' | b'{' => flow += 1,
                b']' | b'}' => flow = flow.saturating_sub(1),
                b'-' | b'?' | b':' if bytes.get(i + 1).is_none_or(|n| *n == b' ') => indicators += 1,
                _ => {}
            }
            if flow + indents.len() + indicators > limit {
                return Some(start + (line.len() - content.len()) + i);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_bounded_before_parsing() {
        let plain = "name: x\ninput:\n  type: object\n  properties:\n    a: {type: string, enum: [a, b]}\n";
        assert_eq!(too_deep(plain, 8), None);
        let deep = format!("x: {}{}\n", "[".repeat(100), "]".repeat(100));
        assert_eq!(too_deep(&deep, 64), Some(3 + 62));
        assert!(too_deep(&format!("x: {}y\n", "- ".repeat(100)), 64).is_some());
        assert!(too_deep("# [[[[[[[[[[\nx: 1 # [[[[[[[[[[\n", 4).is_none());
    }
}
