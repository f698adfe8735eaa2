//! What changed in an agent's skills between two releases: a skill added or removed, its
//! files changed (the text the model reads, or a script beside it), its `allowed-tools`
//! widened or narrowed. A skill that may call more tools is a widening, like a tool contract
//! that may do more.

use std::collections::BTreeSet;

use super::changes::{Change, ChangeKind, Impact};
use crate::skill::facts::SkillFacts;

/// The client tools manifest.toml `[skills] client_tools` declares on the new side and not
/// the old (a widening: a skill may now pre-approve it), then those it no longer declares.
pub fn compare_client_tools(old: &[String], new: &[String]) -> Vec<Change> {
    let at = "skills.client_tools";
    let added = new.iter().filter(|t| !old.contains(t)).map(|t| {
        Change::new(None, ChangeKind::ClientToolAdded, Impact::Widening, at)
            .values(None, Some(t.clone()))
            .message(format!("client tool {t} declared: skills may now allow it"))
    });
    let removed = old.iter().filter(|t| !new.contains(t)).map(|t| {
        Change::new(None, ChangeKind::ClientToolRemoved, Impact::Narrowing, at)
            .values(Some(t.clone()), None)
            .message(format!("client tool {t} no longer declared"))
    });
    added.chain(removed).collect()
}

/// The changes from `old` to `new` skills, in the new side's order, then the removed ones.
pub fn compare_skills(old: &[SkillFacts], new: &[SkillFacts]) -> Vec<Change> {
    let mut out = Vec::new();
    let at = |name: &str| format!("skills/{name}");
    for n in new {
        let Some(o) = old.iter().find(|o| o.name == n.name) else {
            let tools = if n.allowed_tools.is_empty() {
                String::new()
            } else {
                format!(" allowed: {}", n.allowed_tools.join(" "))
            };
            out.push(
                Change::new(None, ChangeKind::SkillAdded, Impact::Widening, at(&n.name))
                    .values(None, Some(n.digest.clone()))
                    .message(format!("skill {} added{tools}", n.name)),
            );
            continue;
        };
        let (was, now): (BTreeSet<&String>, BTreeSet<&String>) =
            (o.allowed_tools.iter().collect(), n.allowed_tools.iter().collect());
        let added: Vec<&str> = now.difference(&was).map(|s| s.as_str()).collect();
        let removed: Vec<&str> = was.difference(&now).map(|s| s.as_str()).collect();
        if !added.is_empty() {
            out.push(
                Change::new(
                    None,
                    ChangeKind::SkillToolsWidened,
                    Impact::Widening,
                    format!("{}.allowed-tools", at(&n.name)),
                )
                .values(Some(o.allowed_tools.join(" ")), Some(n.allowed_tools.join(" ")))
                .message(format!("skill {} may now call {}", n.name, added.join(" "))),
            );
        }
        if !removed.is_empty() {
            out.push(
                Change::new(
                    None,
                    ChangeKind::SkillToolsNarrowed,
                    Impact::Narrowing,
                    format!("{}.allowed-tools", at(&n.name)),
                )
                .values(Some(o.allowed_tools.join(" ")), Some(n.allowed_tools.join(" ")))
                .message(format!("skill {} no longer calls {}", n.name, removed.join(" "))),
            );
        }
        if o.digest != n.digest {
            out.push(
                Change::new(None, ChangeKind::SkillChanged, Impact::Neutral, at(&n.name))
                    .values(Some(o.digest.clone()), Some(n.digest.clone()))
                    .message(format!("skill {} files changed ({} -> {} files)", n.name, o.files, n.files)),
            );
        }
    }
    for o in old.iter().filter(|o| !new.iter().any(|n| n.name == o.name)) {
        out.push(
            Change::new(None, ChangeKind::SkillRemoved, Impact::Breaking, at(&o.name))
                .values(Some(o.digest.clone()), None)
                .message(format!("skill {} removed", o.name)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, digest: &str, tools: &[&str]) -> SkillFacts {
        SkillFacts {
            name: name.into(),
            digest: digest.into(),
            description: String::new(),
            allowed_tools: tools.iter().map(|t| t.to_string()).collect(),
            files: 1,
        }
    }

    #[test]
    fn a_newly_declared_client_tool_is_a_widening() {
        let (old, new) = (["Read".to_owned(), "Bash(git:*)".to_owned()], ["Read".to_owned(), "Bash".to_owned()]);
        let kinds: Vec<_> = compare_client_tools(&old, &new).iter().map(|c| (c.kind, c.impact)).collect();
        assert_eq!(
            kinds,
            [(ChangeKind::ClientToolAdded, Impact::Widening), (ChangeKind::ClientToolRemoved, Impact::Narrowing)]
        );
    }

    #[test]
    fn a_wider_allowed_tools_is_a_widening() {
        let old = [skill("a", "1", &["x"]), skill("gone", "2", &[])];
        let new = [skill("a", "3", &["x", "y"]), skill("b", "4", &[])];
        let kinds: Vec<_> = compare_skills(&old, &new).iter().map(|c| (c.kind, c.impact)).collect();
        assert_eq!(
            kinds,
            [
                (ChangeKind::SkillToolsWidened, Impact::Widening),
                (ChangeKind::SkillChanged, Impact::Neutral),
                (ChangeKind::SkillAdded, Impact::Widening),
                (ChangeKind::SkillRemoved, Impact::Breaking),
            ]
        );
    }
}
