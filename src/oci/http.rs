//! The HTTP side of the registry client ([`super::client`]): what a response's status, headers
//! and body mean (errors that name the URL and the registry's own message), retries with the
//! pause a registry asks for, deadlines on a streamed body, resumable upload sources.

use std::io::Read;
use std::time::Duration;

use ureq::Body;
use ureq::http::Response;

use super::OciError;
use super::client::{FIRST_BACKOFF, PUSH_ATTEMPTS, SMALL_BODY};
use crate::fetch::{FetchError, classify};

/// Names the URL in a read error of a blob stream, so that `io_error` says where.
pub(super) struct IoContext<R> {
    pub(super) inner: R,
    pub(super) url: String,
    /// The operation's deadline and its length: a body trickled one byte at a time stops
    /// there, though no single read waits long.
    pub(super) deadline: Option<(std::time::Instant, Duration)>,
}

impl<R: Read> Read for IoContext<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some((deadline, length)) = self.deadline
            && std::time::Instant::now() >= deadline
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{}: {TIMED_OUT} ({} s, --timeout)", self.url, length.as_secs()),
            ));
        }
        self.inner.read(buf).map_err(|e| match timed_out(&e) {
            true => std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{}: {TIMED_OUT} ({e})", self.url)),
            false => std::io::Error::new(e.kind(), format!("{}: {e}", self.url)),
        })
    }
}

/// How a deadline that passed is said (and recognised in a stream's fault).
pub const TIMED_OUT: &str = "the registry operation ran past its deadline";

pub(super) fn same_origin(url: &str, origin: &str) -> bool {
    url.strip_prefix(origin).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

pub(super) fn with_query(url: &str, query: &str) -> String {
    format!("{url}{}{query}", if url.contains('?') { '&' } else { '?' })
}

pub(super) fn read_limited(url: &str, mut response: Response<Body>, limit: u64) -> Result<Vec<u8>, OciError> {
    let mut bytes = Vec::new();
    response.body_mut().as_reader().take(limit + 1).read_to_end(&mut bytes).map_err(|e| match timed_out(&e) {
        true => OciError::Timeout(format!("{url}: {TIMED_OUT} or went silent ({e})")),
        false => OciError::Io(format!("{url}: {e}")),
    })?;
    if bytes.len() as u64 > limit {
        return Err(OciError::Rejected(
            super::Refusal::UnsupportedArtifact,
            format!("{url}: larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// Whether a body's read error is ureq's timeout (it comes wrapped in an `io::Error` of kind
/// `Other`) or a timed-out socket.
pub(super) fn timed_out(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::TimedOut
        || e.get_ref().and_then(|inner| inner.downcast_ref::<ureq::Error>()).is_some_and(|u| {
            matches!(u, ureq::Error::Timeout(_))
                || matches!(u, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut)
        })
}

pub(super) fn expect_status(url: &str, response: Response<Body>, want: u16) -> Result<(), OciError> {
    let status = response.status().as_u16();
    if status == want { Ok(()) } else { Err(status_error(url, response, status)) }
}

/// An unexpected status, with the registry's error code when its body has one; 5xx and 429
/// are marked transient (retried on push).
pub(super) fn status_error(url: &str, mut response: Response<Body>, status: u16) -> OciError {
    let retry_after = retry_after(&response);
    let body = response.body_mut().with_config().limit(SMALL_BODY).read_to_string().unwrap_or_default();
    let detail = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|d| {
            let e = d.get("errors")?.get(0)?;
            Some(format!(
                " ({}: {})",
                e.get("code")?.as_str()?,
                e.get("message").and_then(|m| m.as_str()).unwrap_or_default()
            ))
        })
        .unwrap_or_default();
    let message = format!("{url}: the registry answered {status} {}{detail}", status_text(status));
    match status {
        401 | 403 => OciError::Auth(message),
        429 | 500..=599 => OciError::Transient { message, retry_after },
        _ => OciError::Io(message),
    }
}

pub(super) fn request_error(url: &str, e: ureq::Error) -> OciError {
    let transient = matches!(e, ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::Timeout(_));
    let refused = matches!(&e, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused)
        || matches!(e, ureq::Error::ConnectionFailed);
    if let ureq::Error::Timeout(which) = &e {
        return OciError::Timeout(format!("{url}: {TIMED_OUT} or went silent ({which})"));
    }
    match classify(url, e) {
        e @ FetchError::Tls { .. } => {
            let mut message = e.to_string();
            // rustls meets an http answer where a TLS record should be.
            if message.contains("InvalidContentType") || message.contains("corrupt message") {
                message.push_str("; the registry seems to speak plain http: if it is one on a trusted network or loopback, add --plain-http");
            }
            OciError::Tls(message)
        }
        e @ FetchError::Downgrade { .. } => OciError::Tls(e.to_string()),
        e if refused => OciError::Transient {
            message: format!("{e}; is a registry running at {}?", host_port(url)),
            retry_after: None,
        },
        e if transient => OciError::Transient { message: e.to_string(), retry_after: None },
        e => OciError::Io(e.to_string()),
    }
}

/// `HOST:PORT` of a URL, for messages.
pub(super) fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    match authority.rsplit_once(':') {
        Some((_, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !authority.ends_with(']') => {
            authority.to_owned()
        }
        _ => format!("{authority}:{}", if url.starts_with("http://") { 80 } else { 443 }),
    }
}

/// Runs `step` until it succeeds, fails for good, or [`PUSH_ATTEMPTS`] transient failures;
/// between tries it waits the registry's `Retry-After` or a doubling backoff, but never past
/// `deadline` (that is a timeout at once).
pub(super) fn retry<T>(
    deadline: std::time::Instant,
    timeout: Duration,
    mut step: impl FnMut() -> Result<T, OciError>,
) -> Result<T, OciError> {
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match step() {
            Err(OciError::Transient { message, retry_after }) if attempt < PUSH_ATTEMPTS => {
                let pause = retry_after.unwrap_or(backoff);
                if std::time::Instant::now() + pause >= deadline {
                    let asked = match retry_after {
                        Some(p) => format!("waiting {} s as the registry asks (Retry-After)", p.as_secs()),
                        None => "the next try".to_owned(),
                    };
                    return Err(OciError::Timeout(format!(
                        "{message}; {asked} would pass the {} s deadline (--timeout)",
                        timeout.as_secs()
                    )));
                }
                std::thread::sleep(pause);
                backoff *= 2;
                attempt += 1;
            }
            Err(OciError::Transient { message, .. }) => {
                return Err(OciError::Io(format!("{message} (gave up after {PUSH_ATTEMPTS} tries)")));
            }
            other => return other,
        }
    }
}

/// The pause a 429 or 503 asks for: `Retry-After` in seconds or as an HTTP date (RFC 9110
/// §10.2.3); `None` for any other status, or a value that is neither.
pub(super) fn retry_after(response: &Response<Body>) -> Option<Duration> {
    if !matches!(response.status().as_u16(), 429 | 503) {
        return None;
    }
    let value = response.headers().get("retry-after")?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or_default())
}

/// A blob's upload session: where it is and how many bytes the registry holds.
pub(super) struct Upload<'a> {
    pub(super) digest: &'a str,
    pub(super) size: u64,
    pub(super) location: String,
    pub(super) sent: u64,
}

pub(super) const OCTET: (&str, &str) = ("Content-Type", "application/octet-stream");

/// The blob's bytes from `offset` on (skipping what the registry already holds).
pub(super) fn open_at(
    open: &mut dyn FnMut() -> std::io::Result<Box<dyn Read>>,
    offset: u64,
) -> Result<Box<dyn Read>, OciError> {
    let fail = |e: std::io::Error| OciError::Io(format!("cannot read the blob to upload: {e}"));
    let mut reader = open().map_err(fail)?;
    let skipped = std::io::copy(&mut (&mut reader).take(offset), &mut std::io::sink()).map_err(fail)?;
    if skipped != offset {
        return Err(OciError::Io(format!("cannot read the blob to upload: it ended at {skipped} of {offset} bytes")));
    }
    Ok(reader)
}

pub(super) fn status_text(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}
