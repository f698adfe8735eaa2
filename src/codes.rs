//! The stable code enums (diagnostic codes, rejection reasons, change kinds, impacts): each
//! value has a string form scripts match on, which never changes once released, and a one-line
//! description that the reference documentation is generated from. One macro defines them all
//! so that they cannot drift apart in what they offer.

/// Defines a stable code enum: `Variant => "string_form": "What it means.",` per value, in
/// documentation order. The enum gets `ALL`, `as_str`, `describe`, `Display` and a
/// `Serialize` as its string form.
macro_rules! stable_codes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident;
        $($variant:ident => $code:literal: $doc:literal,)*
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis enum $name {
            $(#[doc = $doc] $variant,)*
        }

        impl $name {
            /// Every value, in documentation order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The stable string form.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $code,)* }
            }

            /// One line saying what the value means.
            pub fn describe(self) -> &'static str {
                match self { $($name::$variant => $doc,)* }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

pub(crate) use stable_codes;
