//! Fetching small documents (RAP toolsets) over http and https, for `bundle import --from rap
//! URL` and `bundle check --refresh`.
//!
//! One place decides how `bundle` talks to servers: ureq with rustls (ring), trusting the
//! Mozilla roots (webpki-roots) plus any private root named with `--ca-cert`, a 30 s overall
//! timeout, a 4 MiB body limit, `Accept: application/json`. Failures are typed so that callers
//! can tell a TLS failure (an untrusted or mismatched certificate: `tls_error`) from a server
//! that cannot be reached or answers with an error (`io_error`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

use crate::diagnostic::{Code, Diagnostic};
use crate::error::{Error, Result};

/// The largest document a fetch accepts.
pub const BODY_LIMIT: u64 = crate::limits::MAX_IMPORT_BYTES;

/// A configured HTTP(S) client; cheap to share between threads.
#[derive(Debug, Clone)]
pub struct Fetcher {
    agent: ureq::Agent,
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The TLS handshake failed: most often a certificate that no trusted root vouches for, or
    /// one issued for another name.
    #[error("{url}: TLS failed: {message}")]
    Tls { url: String, message: String },
    /// An https fetch was redirected to a plain-http URL, which it refuses to follow.
    #[error("{url}: the server redirected to a plain-http URL ({to}); an https fetch must stay on https")]
    Downgrade { url: String, to: String },
    /// Anything else: no connection, a timeout, an HTTP error status, a body too large.
    #[error("cannot fetch {url}: {message}")]
    Other { url: String, message: String },
}

/// A document as fetched: the URL asked and the text the server sent.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub url: String,
    pub text: String,
}

impl crate::error::Coded for FetchError {
    fn code(&self) -> crate::error::ErrorCode {
        match self {
            FetchError::Tls { .. } | FetchError::Downgrade { .. } => crate::error::ErrorCode::TlsError,
            FetchError::Other { .. } => crate::error::ErrorCode::IoError,
        }
    }
}

impl FetchError {
    /// A failed fetch as a diagnostic on `file` (the URL, or the manifest that pins it):
    /// `tls_error`, with a hint at `ca_hint` (how to trust a private root), or `io_error`. Both
    /// stop the command with exit 2.
    pub fn diagnostic(&self, file: &str, ca_hint: &str) -> Diagnostic {
        match self {
            FetchError::Tls { .. } => Diagnostic::error(Code::TlsError, file, format!("nothing was fetched: {self}"))
                .with_help(format!(
                    "if the server's certificate comes from a private CA, trust its root with {ca_hint}; and check that the URL names the host the certificate is for"
                )),
            FetchError::Downgrade { .. } => Diagnostic::error(Code::TlsError, file, format!("nothing was fetched: {self}"))
                .with_help("fetch the toolset from an https URL that answers without leaving https (ask the server's operator to redirect to https)"),
            FetchError::Other { .. } => Diagnostic::error(Code::IoError, file, self.to_string())
                .with_help("check the URL and the network; the server must answer 200 with the toolset"),
        }
    }
}

impl Fetcher {
    /// A client trusting the Mozilla roots and, in addition, every certificate in the PEM
    /// files `extra_roots` (for servers with a private CA). A file that cannot be read or holds
    /// no certificate is an error.
    pub fn new(extra_roots: &[PathBuf]) -> Result<Self> {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .tls_config(tls_config(extra_roots)?)
            .build()
            .into();
        Ok(Fetcher { agent })
    }

    /// GETs `url` and returns the body as text. An https fetch stays on https: a redirect to
    /// a plain-http URL is refused (a `tls_error`), so that no one on the path can answer in
    /// the server's place.
    pub fn get(&self, url: &str) -> std::result::Result<String, FetchError> {
        let https = url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
        let mut response = self
            .agent
            .get(url)
            .config()
            .https_only(https)
            .build()
            .header("Accept", "application/json")
            .call()
            .map_err(|e| classify(url, e))?;
        response.body_mut().with_config().limit(BODY_LIMIT).read_to_string().map_err(|e| classify(url, e))
    }
}

/// The TLS settings every client of `bundle` uses: the Mozilla roots, plus every certificate in
/// the PEM files `extra_roots` (`--ca-cert`, for servers with a private CA). A file that cannot
/// be read or holds no certificate is an error.
pub fn tls_config(extra_roots: &[PathBuf]) -> Result<TlsConfig> {
    let mut tls = TlsConfig::builder();
    if !extra_roots.is_empty() {
        let mut roots: Vec<Certificate<'static>> =
            webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|c| Certificate::from_der(c.as_ref())).collect();
        for path in extra_roots {
            roots.extend(read_roots(path)?);
        }
        tls = tls.root_certs(RootCerts::new_with_certs(&roots));
    }
    Ok(tls.build())
}

/// The certificates of one PEM file.
fn read_roots(path: &Path) -> Result<Vec<Certificate<'static>>> {
    // A regular file within its cap: a link to /dev/zero or a FIFO is refused before reading.
    let pem = crate::regular_file::read(path, crate::limits::MAX_CA_CERT_BYTES, crate::regular_file::Links::Follow)
        .map_err(|e| Error::io(path, e.into_io()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => return Err(Error::Usage(format!("{}: not a PEM certificate file: {e}", path.display()))),
        }
    }
    if certs.is_empty() {
        return Err(Error::Usage(format!(
            "{}: no certificate in it; --ca-cert takes a PEM file with `-----BEGIN CERTIFICATE-----` blocks",
            path.display()
        )));
    }
    Ok(certs)
}

/// Tells a TLS failure (or an https-to-http redirect) from any other failure of a request.
pub fn classify(url: &str, e: ureq::Error) -> FetchError {
    let tls = match &e {
        ureq::Error::Tls(_) | ureq::Error::Pem(_) | ureq::Error::Rustls(_) | ureq::Error::TlsRequired => true,
        ureq::Error::Io(io) => io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()),
        _ => false,
    };
    if let ureq::Error::RequireHttpsOnly(to) = &e {
        return FetchError::Downgrade { url: url.to_owned(), to: to.clone() };
    }
    let message = match &e {
        ureq::Error::Io(io) if tls => io.get_ref().map_or_else(|| io.to_string(), ToString::to_string),
        other => other.to_string(),
    };
    if tls {
        FetchError::Tls { url: url.to_owned(), message }
    } else {
        FetchError::Other { url: url.to_owned(), message }
    }
}
