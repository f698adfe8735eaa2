//! Where a value is in a JSON document: [`JsonPath`] for diagnostics, [`At`] for a walk.

use std::sync::Arc;

/// A location inside a JSON document, printed as `tools[1].transport.command`; the root is `$`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct JsonPath(pub(super) Vec<Segment>);

/// A key is shared between a path and the paths made from it: the validator makes a path for
/// every value it checks, and most are never printed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Segment {
    Key(Arc<str>),
    Index(usize),
}

impl JsonPath {
    pub fn root() -> Self {
        JsonPath(Vec::new())
    }

    pub fn key(&self, key: &str) -> Self {
        self.with(Segment::Key(key.into()))
    }

    pub fn index(&self, index: usize) -> Self {
        self.with(Segment::Index(index))
    }

    /// This path and one more segment, allocated once at its final length (a clone then a
    /// push would allocate twice: a clone has no room to spare).
    fn with(&self, last: Segment) -> Self {
        let mut segments = Vec::with_capacity(self.0.len() + 1);
        segments.extend(self.0.iter().cloned());
        segments.push(last);
        JsonPath(segments)
    }

    pub fn pop(&mut self) -> bool {
        self.0.pop().is_some()
    }

    pub fn push_key(&mut self, key: &str) {
        self.0.push(Segment::Key(key.into()));
    }

    pub fn push_index(&mut self, index: usize) {
        self.0.push(Segment::Index(index));
    }
}

/// A path being walked, kept on the stack (each step borrows its parent): a walk over a
/// document names where it is at every value, and only the few places a diagnostic is made
/// become a [`JsonPath`] (which allocates).
#[derive(Debug, Clone, Copy)]
pub struct At<'p> {
    parent: Option<&'p At<'p>>,
    step: Step<'p>,
}

#[derive(Debug, Clone, Copy)]
enum Step<'p> {
    Root,
    Key(&'p str),
    Index(usize),
}

impl<'p> At<'p> {
    pub fn root() -> At<'static> {
        At { parent: None, step: Step::Root }
    }

    pub fn key<'q>(&'q self, key: &'q str) -> At<'q> {
        At { parent: Some(self), step: Step::Key(key) }
    }

    pub fn index(&self, index: usize) -> At<'_> {
        At { parent: Some(self), step: Step::Index(index) }
    }
}

/// What a diagnostic's location can be made from.
pub trait ToPath {
    fn to_path(&self) -> JsonPath;
}

impl ToPath for JsonPath {
    fn to_path(&self) -> JsonPath {
        self.clone()
    }
}

impl ToPath for At<'_> {
    fn to_path(&self) -> JsonPath {
        let mut steps = Vec::new();
        let mut at = Some(self);
        while let Some(a) = at {
            steps.push(a.step);
            at = a.parent;
        }
        let mut path = JsonPath(Vec::with_capacity(steps.len()));
        for step in steps.iter().rev() {
            match step {
                Step::Root => {}
                Step::Key(k) => path.push_key(k),
                Step::Index(i) => path.push_index(*i),
            }
        }
        path
    }
}

impl std::fmt::Display for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("$");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Key(k) if is_plain_key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Segment::Key(k) => write!(f, "[{}]", serde_json::Value::String(k.to_string()))?,
            }
        }
        Ok(())
    }
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$'))
}
