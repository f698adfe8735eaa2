//! A bundle the verifier refused: the [`Rejection`] (the stable reason, the entry, the
//! message) and, under a trust policy, what became of each signature. The rejection is the
//! low vocabulary every judge shares ([`crate::rejection`]); the signers' tally is the trust
//! policy's own report, so it travels beside the rejection rather than inside it.

use std::ops::{Deref, DerefMut};

use crate::rejection::Rejection;
use crate::trust_policy::SignersVerdict;

/// A refused bundle, with the trust policy's verdict on its signatures when one judged them.
#[derive(Debug, Clone)]
pub struct Refused {
    pub rejection: Rejection,
    /// With a trust policy: what became of each signature, and each rule's tally.
    pub signers: Option<Box<SignersVerdict>>,
}

impl Refused {
    /// The rejection alone (for a caller that reports only the reason).
    pub fn into_rejection(self) -> Rejection {
        self.rejection
    }
}

impl From<Rejection> for Refused {
    fn from(rejection: Rejection) -> Self {
        Refused { rejection, signers: None }
    }
}

impl From<Refused> for Rejection {
    fn from(r: Refused) -> Self {
        r.rejection
    }
}

impl Deref for Refused {
    type Target = Rejection;

    fn deref(&self) -> &Rejection {
        &self.rejection
    }
}

impl DerefMut for Refused {
    fn deref_mut(&mut self) -> &mut Rejection {
        &mut self.rejection
    }
}
