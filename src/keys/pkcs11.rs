//! Signing with an Ed25519 private key on a PKCS#11 token: an HSM, a smart card, a cloud KMS
//! behind its PKCS#11 module, or SoftHSM2 in tests.
//!
//! `CKM_EDDSA` without parameters is pure Ed25519 over the data given (PKCS#11 3.0 §2.3.14),
//! so the token produces exactly the signatures a minisign key file of the same key would.
//! The vendor's module is loaded at run time by the `cryptoki` crate; no unsafe code here.

use std::path::{Path, PathBuf};

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::Mechanism;
use cryptoki::mechanism::eddsa::{EddsaParams, EddsaSignatureScheme};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;
use zeroize::Zeroizing;

use super::reference::Pkcs11Uri;
use super::{SignerError, derived_key_id};
use crate::minisign::PublicKey;

/// The environment variable naming the PKCS#11 module when the URI has no `module-path`.
pub const MODULE_ENV: &str = "BUNDLE_PKCS11_MODULE";

/// DER of the curve name `edwards25519` as a PrintableString (what SoftHSM and OpenSC write).
const EDWARDS25519_NAME: &[u8] = b"\x13\x0cedwards25519";
/// DER of the OID 1.3.101.112 (id-Ed25519, RFC 8410).
const ED25519_OID: &[u8] = &[0x06, 0x03, 0x2b, 0x65, 0x70];
/// A PIN file longer than this is not a PIN file.
const MAX_PIN_FILE: u64 = crate::limits::MAX_PIN_FILE_BYTES;

/// A private key on a token, with a logged-in session to sign with.
pub struct TokenKey {
    session: Session,
    key: ObjectHandle,
    public: PublicKey,
    description: String,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKey").field("key", &self.description).field("public", &self.public).finish()
    }
}

impl TokenKey {
    /// Loads the module, finds the token and the key `uri` names, and logs in. `module_env` is
    /// the value of `BUNDLE_PKCS11_MODULE`; `pin_fallback` is asked for the PIN of the token
    /// (by label) only when the token needs one and the URI carries none.
    pub fn open(
        uri: &Pkcs11Uri,
        module_env: Option<PathBuf>,
        pin_fallback: &dyn Fn(&str) -> Option<Zeroizing<String>>,
    ) -> Result<TokenKey, SignerError> {
        let (session, label) = open_session(uri, module_env, pin_fallback)?;
        let key = find_key(&session, uri, &label)?;
        let raw = public_key(&session, key, &label)?;
        let public = PublicKey::from_ed25519(derived_key_id(&raw), raw)
            .map_err(|e| SignerError::Pkcs11(format!("the public key on token \"{label}\": {e}")))?;
        Ok(TokenKey { session, key, public, description: format!("{uri} on token \"{label}\"") })
    }

    /// The minisign public key, with the key id derived from the Ed25519 key.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// Which key this is, for messages (never with a PIN).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// A pure Ed25519 signature of `message` by the token (CKM_EDDSA, no parameters).
    pub fn sign(&mut self, message: &[u8]) -> Result<[u8; 64], SignerError> {
        let signature = self.session.sign(&eddsa(), self.key, message).map_err(|e| ck("signing", e))?;
        signature.try_into().map_err(|_| SignerError::Pkcs11("the token's signature is not 64 bytes".to_owned()))
    }
}

/// CKM_EDDSA without parameters: pure Ed25519 (not Ed25519ph or Ed25519ctx).
fn eddsa() -> Mechanism<'static> {
    Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure))
}

/// Loads the module, finds the token `uri` names and opens a read-only session on it, logged
/// in when the token needs it (with the URI's PIN, else `pin_fallback`'s): the session and the
/// token's label. Shared by the Ed25519 and the P-256 token keys.
pub(super) fn open_session(
    uri: &Pkcs11Uri,
    module_env: Option<PathBuf>,
    pin_fallback: &dyn Fn(&str) -> Option<Zeroizing<String>>,
) -> Result<(Session, String), SignerError> {
    let module = uri.module_path.clone().or(module_env.filter(|p| !p.as_os_str().is_empty())).ok_or_else(|| {
        SignerError::ModuleMissing {
            reason: format!("no PKCS#11 module named: add module-path=... to the URI or set {MODULE_ENV}"),
        }
    })?;
    let context = load(&module)?;
    let slot = find_token(&context, uri)?;
    let token = context.get_token_info(slot).map_err(|e| ck("reading the token", e))?;
    let label = token.label().trim().to_owned();
    if token.user_pin_locked() {
        return Err(SignerError::PinLocked { token: label });
    }
    let session = context.open_ro_session(slot).map_err(|e| ck("opening a session", e))?;
    if token.login_required() {
        let pin = if token.protected_authentication_path() { None } else { Some(pin(uri, pin_fallback, &label)?) };
        login(&session, pin, &label)?;
    }
    Ok((session, label))
}

pub(super) fn ck(doing: &str, e: CkError) -> SignerError {
    SignerError::Pkcs11(format!("{doing}: {e}"))
}

pub(super) fn load(module: &Path) -> Result<Pkcs11, SignerError> {
    if !module.is_file() {
        return Err(SignerError::ModuleMissing {
            reason: format!(
                "no PKCS#11 module at {}: install the token vendor's module, or fix module-path / {MODULE_ENV}",
                module.display()
            ),
        });
    }
    let context = Pkcs11::new(module).map_err(|e| SignerError::ModuleMissing {
        reason: format!("cannot load the PKCS#11 module {}: {e}", module.display()),
    })?;
    match context.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(context),
        Err(e) => Err(ck(&format!("initialising {}", module.display()), e)),
    }
}

/// The one slot whose token matches the URI's token attributes.
pub(super) fn find_token(context: &Pkcs11, uri: &Pkcs11Uri) -> Result<Slot, SignerError> {
    let slots = context.get_slots_with_token().map_err(|e| ck("listing the tokens", e))?;
    let mut matching = Vec::new();
    let mut seen = Vec::new();
    for slot in slots {
        let Ok(info) = context.get_token_info(slot) else { continue };
        let label = info.label().trim().to_owned();
        let wanted = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have.trim());
        if uri.slot_id.is_none_or(|id| id == slot.id())
            && wanted(&uri.token, info.label())
            && wanted(&uri.manufacturer, info.manufacturer_id())
            && wanted(&uri.serial, info.serial_number())
            && wanted(&uri.model, info.model())
        {
            matching.push((slot, label.clone()));
        }
        if !label.is_empty() {
            seen.push(label);
        }
    }
    match matching.len() {
        1 => Ok(matching.remove(0).0),
        0 => Err(SignerError::TokenNotFound { wanted: uri.to_string(), available: seen }),
        _ => Err(SignerError::Ambiguous {
            what: "tokens".to_owned(),
            found: matching.into_iter().map(|(_, l)| format!("token={l}")).collect(),
            fix: "name one with token= (or serial=, slot-id=)".to_owned(),
        }),
    }
}

/// The PIN from `pin-value`, `pin-source`, or the caller's fallback (an environment variable
/// or a prompt), in that order.
pub(super) fn pin(
    uri: &Pkcs11Uri,
    fallback: &dyn Fn(&str) -> Option<Zeroizing<String>>,
    token: &str,
) -> Result<Zeroizing<String>, SignerError> {
    if let Some(pin) = &uri.pin_value {
        return Ok(pin.clone());
    }
    if let Some(path) = &uri.pin_source {
        return read_pin_file(path);
    }
    fallback(token).ok_or_else(|| SignerError::PinRequired { token: token.to_owned() })
}

fn read_pin_file(path: &Path) -> Result<Zeroizing<String>, SignerError> {
    use std::io::Read as _;
    let fail = |reason: String| SignerError::PinSource { path: path.to_owned(), reason };
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut bytes = Zeroizing::new(Vec::with_capacity(MAX_PIN_FILE as usize + 1));
    file.take(MAX_PIN_FILE + 1).read_to_end(&mut bytes).map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_PIN_FILE {
        return Err(fail(format!("longer than {MAX_PIN_FILE} bytes; it must hold only the PIN")));
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| fail("not UTF-8 text".to_owned()))?;
    // One trailing line break is the file's, not the PIN's.
    let pin = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(text);
    Ok(Zeroizing::new(pin.to_owned()))
}

pub(super) fn login(session: &Session, pin: Option<Zeroizing<String>>, token: &str) -> Result<(), SignerError> {
    let auth = pin.map(|p| AuthPin::from(p.as_str()));
    match session.login(UserType::User, auth.as_ref()) {
        Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(()),
        Err(CkError::Pkcs11(RvError::PinIncorrect | RvError::PinLenRange, _)) => {
            Err(SignerError::PinIncorrect { token: token.to_owned() })
        }
        Err(CkError::Pkcs11(RvError::PinLocked, _)) => Err(SignerError::PinLocked { token: token.to_owned() }),
        Err(CkError::Pkcs11(RvError::PinExpired | RvError::UserPinNotInitialized, _)) => Err(SignerError::Pkcs11(
            format!("the user PIN of token \"{token}\" is expired or not set; set it with the token's tools"),
        )),
        Err(e) => Err(ck("logging in", e)),
    }
}

/// The one Ed25519 private key the URI names (by `object=` label and/or `id=`).
fn find_key(session: &Session, uri: &Pkcs11Uri, token: &str) -> Result<ObjectHandle, SignerError> {
    let mut template = vec![Attribute::Class(ObjectClass::PRIVATE_KEY)];
    if let Some(label) = &uri.object {
        template.push(Attribute::Label(label.as_bytes().to_vec()));
    }
    if let Some(id) = &uri.id {
        template.push(Attribute::Id(id.clone()));
    }
    let named = uri.object.is_some() || uri.id.is_some();
    if !named {
        template.push(Attribute::KeyType(KeyType::EC_EDWARDS));
    }
    let mut found = session.find_objects(&template).map_err(|e| ck("searching the token", e))?;
    match found.len() {
        0 => Err(SignerError::KeyNotFound {
            wanted: uri.to_string(),
            token: token.to_owned(),
            hint: if named {
                "check object= (the key's label) and id= with `pkcs11-tool --list-objects --login`".to_owned()
            } else {
                "the token holds no Ed25519 private key; make one (pkcs11-tool --keypairgen --key-type EC:edwards25519) or name yours with object= or id=".to_owned()
            },
        }),
        1 => {
            let key = found.remove(0);
            check_ed25519(session, key, token)?;
            Ok(key)
        }
        _ => Err(SignerError::Ambiguous {
            what: format!("private keys on token \"{token}\""),
            found: found.iter().map(|&k| describe(session, k)).collect(),
            fix: "name one with object= or id=".to_owned(),
        }),
    }
}

pub(super) fn describe(session: &Session, key: ObjectHandle) -> String {
    let attrs = session.get_attributes(key, &[AttributeType::Label, AttributeType::Id]).unwrap_or_default();
    let mut parts = Vec::new();
    for attr in attrs {
        match attr {
            Attribute::Label(l) => parts.push(format!("object={}", String::from_utf8_lossy(&l))),
            Attribute::Id(id) => {
                parts.push(format!("id={}", id.iter().map(|b| format!("%{b:02x}")).collect::<String>()))
            }
            _ => {}
        }
    }
    parts.join(";")
}

fn check_ed25519(session: &Session, key: ObjectHandle, token: &str) -> Result<(), SignerError> {
    let attrs = session
        .get_attributes(key, &[AttributeType::KeyType, AttributeType::EcParams])
        .map_err(|e| ck("reading the key's type", e))?;
    let key_type = attrs.iter().find_map(|a| if let Attribute::KeyType(t) = a { Some(*t) } else { None });
    let params = attrs.iter().find_map(|a| if let Attribute::EcParams(p) = a { Some(p.as_slice()) } else { None });
    let what = format!("the key {} on token \"{token}\"", describe(session, key));
    match (key_type, params) {
        (Some(t), Some(p)) if t == KeyType::EC_EDWARDS && (p == EDWARDS25519_NAME || p == ED25519_OID) => Ok(()),
        (Some(t), _) if t == KeyType::EC_EDWARDS => {
            Err(SignerError::NotEd25519 { what, found: "an Edwards curve other than edwards25519 (Ed448?)".to_owned() })
        }
        (Some(t), _) => Err(SignerError::NotEd25519 { what, found: format!("a {t} key") }),
        (None, _) => Err(SignerError::NotEd25519 { what, found: "a key of unknown type".to_owned() }),
    }
}

/// The raw Ed25519 public key: CKA_EC_POINT of the public key object with the private key's
/// id (else its label), or of the private key itself where the token exposes it there.
fn public_key(session: &Session, key: ObjectHandle, token: &str) -> Result<[u8; 32], SignerError> {
    let candidates = public_key_candidates(session, key, KeyType::EC_EDWARDS)?;
    // An id or label can be shared by unrelated objects: the public key is the one that
    // verifies a signature the private key makes.
    let probe = b"agent-bundle: which public key belongs to this private key";
    let signature = session.sign(&eddsa(), key, probe).map_err(|e| ck("signing a test message", e))?;
    let signature = ed25519_dalek::Signature::from_slice(&signature)
        .map_err(|_| SignerError::Pkcs11("the token's signature is not 64 bytes".to_owned()))?;
    for object in candidates.into_iter().chain([key]) {
        let Ok(attrs) = session.get_attributes(object, &[AttributeType::EcPoint]) else { continue };
        if let Some(Attribute::EcPoint(point)) = attrs.into_iter().next()
            && let Some(raw) = ec_point(&point)
            && ed25519_dalek::VerifyingKey::from_bytes(&raw).is_ok_and(|k| k.verify_strict(probe, &signature).is_ok())
        {
            return Ok(raw);
        }
    }
    Err(SignerError::KeyNotFound {
        wanted: "its public key".to_owned(),
        token: token.to_owned(),
        hint: "the token has no public key object (with the private key's id or label) that verifies its signatures; store the public key beside it with the same id".to_owned(),
    })
}

/// The public key objects of type `kind` with the private key's id or its label: where its
/// public key may be (an id or label can be shared by unrelated objects, so the caller keeps
/// the one that verifies a signature the private key makes).
pub(super) fn public_key_candidates(
    session: &Session,
    key: ObjectHandle,
    kind: KeyType,
) -> Result<Vec<ObjectHandle>, SignerError> {
    let attrs = session
        .get_attributes(key, &[AttributeType::Id, AttributeType::Label])
        .map_err(|e| ck("reading the key's id", e))?;
    let mut candidates = Vec::new();
    for attr in attrs {
        let by = match attr {
            Attribute::Id(id) if !id.is_empty() => Attribute::Id(id),
            Attribute::Label(l) if !l.is_empty() => Attribute::Label(l),
            _ => continue,
        };
        let template = [Attribute::Class(ObjectClass::PUBLIC_KEY), Attribute::KeyType(kind), by];
        candidates.extend(session.find_objects(&template).map_err(|e| ck("searching the public key", e))?);
    }
    Ok(candidates)
}

/// CKA_EC_POINT of an Ed25519 key: a DER OCTET STRING of 32 bytes (PKCS#11 3.0), or the raw
/// 32 bytes (some older modules).
fn ec_point(point: &[u8]) -> Option<[u8; 32]> {
    match point {
        [0x04, 0x20, rest @ ..] if rest.len() == 32 => rest.try_into().ok(),
        raw if raw.len() == 32 => raw.try_into().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec_points_in_both_encodings() {
        let mut der = vec![0x04, 0x20];
        der.extend([7u8; 32]);
        assert_eq!(ec_point(&der), Some([7u8; 32]));
        assert_eq!(ec_point(&[7u8; 32]), Some([7u8; 32]));
        assert_eq!(ec_point(&der[..20]), None);
    }

    #[test]
    fn pin_files_lose_one_trailing_line_break() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pin");
        for (content, pin) in [("1234\n", "1234"), ("1234\r\n", "1234"), ("1234", "1234"), ("12 34\n\n", "12 34\n")] {
            std::fs::write(&path, content).unwrap();
            assert_eq!(read_pin_file(&path).unwrap().as_str(), pin);
        }
        std::fs::write(&path, "1".repeat(2000)).unwrap();
        let err = read_pin_file(&path).unwrap_err();
        assert!(!err.to_string().contains("1111"), "{err}");
    }
}
