//! A distribution-spec v1.1 client for one repository: ping, blob HEAD, monolithic and chunked
//! uploads, cross-repository mount, manifest PUT and GET, streaming blob GET; anonymous, Basic
//! and Bearer-token authentication.
//!
//! Written on the crate's blocking `ureq` rather than `oci-client` (formerly
//! `oci-distribution`): that crate is async on tokio, and `bundle` is a synchronous program whose
//! verifier consumes an `impl Read`; a runtime and a channel between it and the verifier would
//! cost more than these few requests. The OCI types come from `oci-spec`.
//!
//! Every response is read under a size limit except a blob body, which is handed out as a
//! stream for the caller to bound ([`super::artifact::CheckedReader`]). Credentials go only to
//! the registry's own origin and to the token realm it names (https only, unless
//! `--plain-http`); a redirect drops them.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use ureq::http::{Request, Response};
use ureq::{Body, SendBody};
use zeroize::Zeroizing;

use super::OciError;
use super::auth::{Challenge, Credentials, query_escape, token_from_response};
use super::reference::Reference;
use crate::fetch::tls_config;

pub use super::http::TIMED_OUT;
use super::http::{
    IoContext, OCTET, Upload, expect_status, open_at, read_limited, request_error, retry, retry_after, same_origin,
    status_error, status_text, with_query,
};

/// Blobs up to this size go up in one PUT; larger ones in PATCH chunks of this size.
pub const CHUNK_SIZE: u64 = 32 << 20;
/// How often a push step is tried when the registry answers 5xx/429 or the connection fails.
pub const PUSH_ATTEMPTS: u32 = 4;
/// The first pause between tries; it doubles each time.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The largest error body or token answer read.
pub(super) const SMALL_BODY: u64 = crate::limits::MAX_REGISTRY_SMALL_BODY_BYTES;

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Speak plain http (only ever by explicit choice).
    pub plain_http: bool,
    /// Extra trusted roots (`--ca-cert`).
    pub ca_certs: Vec<PathBuf>,
    /// Blobs larger than this go up in PATCH chunks of this size; `None`: [`CHUNK_SIZE`].
    pub chunk_size: Option<u64>,
    /// The overall deadline of the operation (`--timeout`), from connecting to the last byte
    /// of the layer; `None`: [`crate::limits::REGISTRY_TIMEOUT_SECS`].
    pub timeout: Option<Duration>,
}

/// The body of a request.
enum Payload<'a> {
    Bytes(&'a [u8]),
    Stream(&'a mut dyn Read, u64),
}

/// What happened to one blob on push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlobPush {
    /// The repository already had it (HEAD answered 200).
    Exists,
    /// Mounted from another repository of the same registry.
    Mounted,
    /// Uploaded in one PUT.
    Uploaded,
    /// Uploaded in PATCH chunks.
    Chunked,
}

/// A client for one repository.
pub struct Client {
    agent: ureq::Agent,
    /// `https://host:port` (or `http://` with `--plain-http`).
    origin: String,
    plain_http: bool,
    repository: String,
    registry: String,
    credentials: Option<Credentials>,
    authorization: Option<Zeroizing<String>>,
    /// `pull` or `pull,push`, and any repository to mount from.
    scopes: Vec<String>,
    chunk_size: u64,
    /// When the whole operation must be over (`--timeout`).
    deadline: std::time::Instant,
    timeout: Duration,
}

impl Client {
    /// Connects to `reference`'s registry: reads credentials, pings `/v2/`, and answers its
    /// challenge (for `push`, with a push scope; `mount_from` adds a pull scope there).
    pub fn connect(
        reference: &Reference,
        options: &Options,
        push: bool,
        mount_from: Option<&str>,
    ) -> Result<Self, OciError> {
        let tls = tls_config(&options.ca_certs).map_err(|e| OciError::Usage(e.to_string()))?;
        let timeout = options.timeout.unwrap_or(Duration::from_secs(crate::limits::REGISTRY_TIMEOUT_SECS));
        let idle = Duration::from_secs(crate::limits::REGISTRY_IDLE_SECS).min(timeout);
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .https_only(!options.plain_http)
            .tls_config(tls)
            .timeout_global(Some(timeout))
            .timeout_connect(Some(Duration::from_secs(30).min(timeout)))
            .timeout_per_read(Some(idle))
            .timeout_per_write(Some(idle))
            .user_agent(concat!("agent-bundle/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let credentials = Credentials::lookup(&reference.registry).map_err(OciError::Usage)?;
        let scheme = if options.plain_http { "http" } else { "https" };
        let actions = if push { "pull,push" } else { "pull" };
        let mut scopes = vec![format!("repository:{}:{actions}", reference.repository)];
        scopes.extend(mount_from.map(|r| format!("repository:{r}:pull")));
        let mut client = Client {
            agent,
            origin: format!("{scheme}://{}", reference.registry),
            plain_http: options.plain_http,
            repository: reference.repository.clone(),
            registry: reference.registry.clone(),
            credentials,
            authorization: None,
            scopes,
            chunk_size: options.chunk_size.unwrap_or(CHUNK_SIZE).max(1),
            deadline: std::time::Instant::now() + timeout,
            timeout,
        };
        client.ping()?;
        Ok(client)
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v2/{}/{path}", self.origin, self.repository)
    }

    /// `GET /v2/`: 200 needs no credentials; 401 names the scheme to use.
    fn ping(&mut self) -> Result<(), OciError> {
        let url = format!("{}/v2/", self.origin);
        let response = self.send_once("GET", &url, &[], Payload::Bytes(&[]))?;
        match response.status().as_u16() {
            200 => Ok(()),
            401 => self.authenticate(&response),
            404 => Err(OciError::Io(format!("{url}: not a registry (404 for the /v2/ API)"))),
            s => Err(OciError::Io(format!("{url}: the registry answered {s} {}", status_text(s)))),
        }
    }

    /// Answers a 401's challenge: Basic with the credentials, or a token from the realm.
    fn authenticate(&mut self, response: &Response<Body>) -> Result<(), OciError> {
        let header = response
            .headers()
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(Challenge::parse);
        match header {
            Some(Challenge::Basic) => match &self.credentials {
                Some(c) => {
                    self.authorization = Some(c.basic());
                    Ok(())
                }
                None => Err(self.needs_credentials()),
            },
            Some(Challenge::Bearer { realm, service, .. }) => self.fetch_token(&realm, service.as_deref()),
            None => Err(OciError::Auth(format!(
                "{}: the registry asks for authentication this client does not speak (only Basic and Bearer)",
                self.registry
            ))),
        }
    }

    fn needs_credentials(&self) -> OciError {
        OciError::Auth(format!(
            "{} requires credentials: set {} and {} (for example from a CI secret), or log in with `docker login {}` (auths in ~/.docker/config.json)",
            self.registry,
            super::auth::ENV_USERNAME,
            super::auth::ENV_PASSWORD,
            self.registry
        ))
    }

    /// The Docker token flow: GET realm?service=…&scope=…, with Basic credentials if any.
    fn fetch_token(&mut self, realm: &str, service: Option<&str>) -> Result<(), OciError> {
        let https = realm.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://"));
        let http = realm.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://"));
        if !(https || (http && self.plain_http)) {
            return Err(OciError::Auth(format!(
                "{}: the token realm `{realm}` is not an https URL; refusing to send credentials there",
                self.registry
            )));
        }
        let mut url = realm.to_owned();
        let mut sep = if url.contains('?') { '&' } else { '?' };
        for (k, v) in service
            .map(|s| ("service", s.to_owned()))
            .into_iter()
            .chain(self.scopes.iter().map(|s| ("scope", s.clone())))
        {
            url.push_str(&format!("{sep}{k}={}", query_escape(&v)));
            sep = '&';
        }
        let mut request = Request::builder().method("GET").uri(&url);
        // Credentials only to an https realm or the registry's own origin: with --plain-http, a
        // realm on another origin would get them in cleartext (it is asked anonymously).
        if let Some(c) = &self.credentials
            && (https || same_origin(realm, &self.origin))
        {
            request = request.header("Authorization", c.basic().as_str());
        }
        let request = request.body(()).map_err(|e| OciError::Usage(format!("bad token realm `{realm}`: {e}")))?;
        let mut response = self.agent.run(request).map_err(|e| request_error(realm, e))?;
        let status = response.status().as_u16();
        if status == 401 || status == 403 {
            return Err(match &self.credentials {
                Some(c) => OciError::Auth(format!(
                    "{}: the token server refused the credentials from {} ({status})",
                    self.registry, c.source
                )),
                None => self.needs_credentials(),
            });
        }
        let body = response
            .body_mut()
            .with_config()
            .limit(SMALL_BODY)
            .read_to_string()
            .map_err(|e| request_error(realm, e))?;
        if status != 200 {
            return Err(OciError::Auth(format!(
                "{}: the token server answered {status} {}",
                self.registry,
                status_text(status)
            )));
        }
        let token = token_from_response(&body)
            .ok_or_else(|| OciError::Auth(format!("{}: the token server's answer holds no token", self.registry)))?;
        self.authorization = Some(Zeroizing::new(format!("Bearer {}", token.as_str())));
        Ok(())
    }

    /// One request; the credentials go along only to the registry's own origin.
    fn send_once(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        payload: Payload<'_>,
    ) -> Result<Response<Body>, OciError> {
        let mut request = Request::builder().method(method).uri(url);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        if let Some(a) = &self.authorization
            && same_origin(url, &self.origin)
        {
            request = request.header("Authorization", a.as_str());
        }
        // Each call gets what is left of the operation's deadline, so that many slow calls (a
        // manifest trickled in, then a config) cannot add up to more than --timeout.
        let left = self.time_left(url)?;
        let result = match payload {
            Payload::Bytes(b) => request
                .header("Content-Length", b.len().to_string())
                .body(b)
                .map(|r| self.agent.run(self.agent.configure_request(r).timeout_global(Some(left)).build())),
            Payload::Stream(reader, len) => request
                .header("Content-Length", len.to_string())
                .body(SendBody::from_reader(reader))
                .map(|r| self.agent.run(self.agent.configure_request(r).timeout_global(Some(left)).build())),
        };
        result.map_err(|e| OciError::Usage(format!("bad request URL `{url}`: {e}")))?.map_err(|e| request_error(url, e))
    }

    /// What is left of the operation's deadline; a timeout error once it has passed.
    fn time_left(&self, url: &str) -> Result<Duration, OciError> {
        let left = self.deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() { Err(self.timed_out(url)) } else { Ok(left) }
    }

    fn timed_out(&self, url: &str) -> OciError {
        OciError::Timeout(format!("{url}: {TIMED_OUT} ({} s, --timeout)", self.timeout.as_secs()))
    }

    /// A request whose body can be sent again: a 401 is answered once and the request retried;
    /// a 429 or 503 that names a `Retry-After` is tried again after that pause, while the pause
    /// fits in the deadline.
    fn send(
        &mut self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response<Body>, OciError> {
        let mut busy = 1;
        let response = loop {
            let response = self.send_once(method, url, headers, Payload::Bytes(body))?;
            let Some(pause) = retry_after(&response) else { break response };
            if busy >= PUSH_ATTEMPTS {
                break response;
            }
            self.wait(url, pause)?;
            busy += 1;
        };
        if response.status().as_u16() != 401 {
            return Ok(response);
        }
        let had = self.authorization.is_some();
        self.authenticate(&response)?;
        let response = self.send_once(method, url, headers, Payload::Bytes(body))?;
        if response.status().as_u16() == 401 {
            return Err(match (&self.credentials, had) {
                (Some(c), _) => OciError::Auth(format!(
                    "{}: the registry refused the credentials from {} (401)",
                    self.registry, c.source
                )),
                (None, _) => self.needs_credentials(),
            });
        }
        Ok(response)
    }

    /// `HEAD /blobs/<digest>`: whether the repository has the blob.
    pub fn has_blob(&mut self, digest: &str) -> Result<bool, OciError> {
        let url = self.url(&format!("blobs/{digest}"));
        let response = self.send("HEAD", &url, &[], &[])?;
        match response.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            s => Err(status_error(&url, response, s)),
        }
    }

    /// Sleeps `pause` (a registry's `Retry-After`) unless that would pass the deadline, which
    /// is then a timeout at once: waiting would only fail later.
    fn wait(&self, url: &str, pause: Duration) -> Result<(), OciError> {
        let left = self.time_left(url)?;
        if pause >= left {
            return Err(OciError::Timeout(format!(
                "{url}: the registry asked to wait {} s (Retry-After), longer than what is left of the {} s deadline (--timeout)",
                pause.as_secs(),
                self.timeout.as_secs()
            )));
        }
        std::thread::sleep(pause);
        Ok(())
    }

    /// Uploads a blob unless the repository has it, mounting it from `mount_from` when that
    /// repository does. `open` gives the blob's bytes from the start (again on each try).
    /// 5xx, 429 and failed connections are retried [`PUSH_ATTEMPTS`] times with backoff, or
    /// after the registry's `Retry-After`, within the deadline.
    pub fn push_blob(
        &mut self,
        digest: &str,
        size: u64,
        open: &mut dyn FnMut() -> std::io::Result<Box<dyn Read>>,
        mount_from: Option<&str>,
    ) -> Result<BlobPush, OciError> {
        let (deadline, timeout) = (self.deadline, self.timeout);
        retry(deadline, timeout, || {
            if self.has_blob(digest)? {
                return Ok(BlobPush::Exists);
            }
            let start = match mount_from {
                Some(from) => {
                    self.url(&format!("blobs/uploads/?mount={}&from={}", query_escape(digest), query_escape(from)))
                }
                None => self.url("blobs/uploads/"),
            };
            let response = self.send("POST", &start, &[], &[])?;
            let status = response.status().as_u16();
            if status == 201 && mount_from.is_some() {
                return Ok(BlobPush::Mounted);
            }
            if status != 202 {
                return Err(status_error(&start, response, status));
            }
            let location = self.location(&start, &response)?;
            self.upload(Upload { digest, size, location, sent: 0 }, open)
        })
    }

    /// Sends a blob's bytes into an upload session: in one PUT, or in PATCH chunks and a closing
    /// PUT. A streamed body cannot be sent again, so a 401 on it (a token that expired during
    /// a long upload) is answered by authenticating anew, asking the registry how much of the
    /// upload it holds (`GET` of the session; a new session if it forgot this one), reopening
    /// the blob there and going on: the distribution spec's resumable upload.
    fn upload(
        &mut self,
        mut upload: Upload<'_>,
        open: &mut dyn FnMut() -> std::io::Result<Box<dyn Read>>,
    ) -> Result<BlobPush, OciError> {
        let mut reader = open_at(open, 0)?;
        let chunk_size = self.chunk_size;
        let chunked = upload.size > chunk_size;
        let mut reauthentications = 0;
        while upload.sent < upload.size || !chunked {
            let n = if chunked { chunk_size.min(upload.size - upload.sent) } else { upload.size - upload.sent };
            let range = format!("{}-{}", upload.sent, (upload.sent + n).saturating_sub(1));
            let mut body = (&mut reader).take(n);
            let response = if chunked {
                let headers = [OCTET, ("Content-Range", range.as_str())];
                self.send_once("PATCH", &upload.location, &headers, Payload::Stream(&mut body, n))?
            } else {
                let put = with_query(&upload.location, &format!("digest={}", query_escape(upload.digest)));
                self.send_once("PUT", &put, &[OCTET], Payload::Stream(&mut body, n))?
            };
            let status = response.status().as_u16();
            if status == 401 && reauthentications < PUSH_ATTEMPTS {
                reauthentications += 1;
                self.authenticate(&response)?;
                upload = self.resume(upload)?;
                reader = open_at(open, upload.sent)?;
                continue;
            }
            if !chunked {
                expect_status(&upload.location, response, 201)?;
                return Ok(BlobPush::Uploaded);
            }
            if status != 202 {
                return Err(status_error(&upload.location, response, status));
            }
            upload.location = self.location(&upload.location, &response)?;
            upload.sent += n;
        }
        let put = with_query(&upload.location, &format!("digest={}", query_escape(upload.digest)));
        let response = self.send("PUT", &put, &[], &[])?;
        expect_status(&put, response, 201)?;
        Ok(BlobPush::Chunked)
    }

    /// Where an upload session stands (`GET` of its URL: 204 and `Range: 0-LAST`), or a new
    /// session from the start when the registry no longer knows it.
    fn resume<'a>(&mut self, upload: Upload<'a>) -> Result<Upload<'a>, OciError> {
        let response = self.send("GET", &upload.location, &[], &[])?;
        let status = response.status().as_u16();
        if status == 204 {
            let last = response
                .headers()
                .get("range")
                .and_then(|v| v.to_str().ok())
                .and_then(|r| r.split_once('-'))
                .and_then(|(_, last)| last.trim().parse::<u64>().ok())
                .unwrap_or(0);
            // `0-0` says nothing: distribution writes it for an empty upload and for one byte.
            // Only a range that names bytes is resumed; otherwise a new session starts.
            if last == 0 {
                return self.restart(upload);
            }
            let held = last + 1;
            if held > upload.size {
                return Err(OciError::Io(format!(
                    "{}: the registry holds {held} bytes of a {}-byte upload",
                    upload.location, upload.size
                )));
            }
            let location = match response.headers().contains_key("location") {
                true => self.location(&upload.location, &response)?,
                false => upload.location,
            };
            return Ok(Upload { location, sent: held, ..upload });
        }
        self.restart(upload)
    }

    /// A new upload session for the same blob, from its first byte.
    fn restart<'a>(&mut self, upload: Upload<'a>) -> Result<Upload<'a>, OciError> {
        let start = self.url("blobs/uploads/");
        let response = self.send("POST", &start, &[], &[])?;
        let status = response.status().as_u16();
        if status != 202 {
            return Err(status_error(&start, response, status));
        }
        let location = self.location(&start, &response)?;
        Ok(Upload { location, sent: 0, ..upload })
    }

    /// `PUT /manifests/<tag or digest>`.
    pub fn put_manifest(&mut self, reference: &str, bytes: &[u8], media_type: &str) -> Result<(), OciError> {
        let url = self.url(&format!("manifests/{reference}"));
        let (deadline, timeout) = (self.deadline, self.timeout);
        retry(deadline, timeout, || {
            let response = self.send("PUT", &url, &[("Content-Type", media_type)], bytes)?;
            expect_status(&url, response, 201)
        })
    }

    /// `GET /manifests/<tag or digest>` (an OCI image manifest), read under `limit`.
    pub fn get_manifest(&mut self, reference: &str, accept: &str, limit: u64) -> Result<Vec<u8>, OciError> {
        let url = self.url(&format!("manifests/{reference}"));
        let response = self.send("GET", &url, &[("Accept", accept)], &[])?;
        let status = response.status().as_u16();
        if status == 404 {
            return Err(OciError::Io(format!("{url}: no such manifest (404); check the repository and tag")));
        }
        if status != 200 {
            return Err(status_error(&url, response, status));
        }
        read_limited(&url, response, limit)
    }

    /// `PUT /manifests/<reference>` of a manifest with a `subject`: whether the registry
    /// answered with `OCI-Subject`, i.e. it keeps the referrers index itself (OCI 1.1). A
    /// registry without the referrers API ignores the field, and the client keeps the fallback
    /// tag (`crate::oci::referrers`).
    pub fn put_manifest_with_subject(
        &mut self,
        reference: &str,
        bytes: &[u8],
        media_type: &str,
    ) -> Result<bool, OciError> {
        let url = self.url(&format!("manifests/{reference}"));
        let (deadline, timeout) = (self.deadline, self.timeout);
        retry(deadline, timeout, || {
            let response = self.send("PUT", &url, &[("Content-Type", media_type)], bytes)?;
            let has_subject = response.headers().contains_key("OCI-Subject");
            expect_status(&url, response, 201).map(|()| has_subject)
        })
    }

    /// `GET <path>` of a manifest or index under `limit`; `None` for 404 (and, for the
    /// referrers API, for a registry that does not have it: 404 as well).
    pub fn get_optional(&mut self, path: &str, accept: &str, limit: u64) -> Result<Option<Vec<u8>>, OciError> {
        let url = self.url(path);
        let response = self.send("GET", &url, &[("Accept", accept)], &[])?;
        match response.status().as_u16() {
            200 => read_limited(&url, response, limit).map(Some),
            404 => Ok(None),
            s => Err(status_error(&url, response, s)),
        }
    }

    /// `GET /blobs/<digest>` as a stream; the caller bounds and checks it.
    pub fn get_blob(&mut self, digest: &str) -> Result<Box<dyn Read + Send>, OciError> {
        let url = self.url(&format!("blobs/{digest}"));
        let response = self.send("GET", &url, &[], &[])?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(status_error(&url, response, status));
        }
        let url2 = url.clone();
        let inner = response.into_body().into_reader();
        Ok(Box::new(IoContext { inner, url: url2, deadline: Some((self.deadline, self.timeout)) }))
    }

    /// A small blob (the config), read under `limit`.
    pub fn get_small_blob(&mut self, digest: &str, limit: u64) -> Result<Vec<u8>, OciError> {
        let url = self.url(&format!("blobs/{digest}"));
        let response = self.send("GET", &url, &[], &[])?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(status_error(&url, response, status));
        }
        read_limited(&url, response, limit)
    }

    /// The upload URL the registry named (`Location`, possibly relative).
    fn location(&self, url: &str, response: &Response<Body>) -> Result<String, OciError> {
        let loc = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| OciError::Io(format!("{url}: the registry gave no upload Location")))?;
        if loc.starts_with('/') {
            Ok(format!("{}{loc}", self.origin))
        } else if loc.starts_with("https://") || (self.plain_http && loc.starts_with("http://")) {
            Ok(loc.to_owned())
        } else {
            Err(OciError::Io(format!("{url}: unusable upload Location `{loc}`")))
        }
    }
}
