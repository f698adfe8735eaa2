//! The artifact a bundle becomes in a registry (docs/FORMAT.md, "OCI artifact"): an OCI image
//! manifest with `artifactType` [`ARTIFACT_TYPE`], an informational config blob, and exactly one
//! layer holding the bundle's bytes unchanged.
//!
//! Pushing builds the manifest from fixed fields only (no timestamps), so the same bundle gives
//! the same manifest digest anywhere. Pulling accepts any manifest of this shape (another
//! client's config, or none of our fields in it): the decision is made on the layer's bytes.
//! [`CheckedReader`] holds those bytes to the layer's descriptor as they stream: no more bytes
//! than its size, and at the end exactly its size and its sha256.

use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use oci_spec::image::{Descriptor, ImageManifest, ImageManifestBuilder, MediaType};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const ARTIFACT_TYPE: &str = "application/vnd.agent-bundle.v1";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.agent-bundle.config.v1+json";
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.agent-bundle.v1.tar+zstd";
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// The largest manifest or config read (the distribution spec's recommended manifest limit).
pub use crate::limits::MAX_OCI_MANIFEST_BYTES as MAX_MANIFEST_BYTES;

/// The config blob: what `inspect oci://` shows without the layer. Unsigned and informational;
/// field order is fixed, so its bytes (and digest) depend only on the bundle.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Config {
    pub name: Option<String>,
    pub version: Option<String>,
    pub key_id: Option<String>,
    pub expires: Option<String>,
    pub tools: Vec<String>,
}

/// An artifact's config, parsed leniently (another client's config has none of our fields)
/// but under the caps of every JSON input: unsigned and informational, it must not cost more
/// than a file would (a 4 MiB config of empty strings held 180-230 MB as a `serde_json`
/// value). `Err` says which cap it broke.
pub fn parse_config(bytes: &[u8]) -> Result<Config, String> {
    let text = String::from_utf8_lossy(bytes);
    let source = crate::diagnostic::Source::new("config", text.as_ref());
    let budget = crate::json::Budget::new(crate::limits::MAX_OCI_CONFIG_VALUES);
    match crate::json::parse_within(&source, &budget, &mut Vec::new()) {
        Ok(doc) => Ok(serde_json::from_value(doc.value).unwrap_or_default()),
        Err(d) if d.code == crate::diagnostic::Code::LimitExceeded => Err(format!("its config holds {}", d.message)),
        Err(_) => Ok(Config::default()),
    }
}

/// A blob's digest: `sha256:` and lowercase hex.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A streaming sha256 and byte count.
#[derive(Default, Clone)]
pub struct Sha256Counter {
    hasher: Sha256,
    pub bytes: u64,
}

impl Sha256Counter {
    pub fn update(&mut self, chunk: &[u8]) {
        self.hasher.update(chunk);
        self.bytes += chunk.len() as u64;
    }
    pub fn digest(self) -> String {
        format!("sha256:{}", hex::encode(self.hasher.finalize()))
    }
}

/// The manifest for a config blob and a bundle layer, as the bytes to PUT.
pub fn manifest_bytes(config: (&str, u64), layer: (&str, u64), title: &str) -> Vec<u8> {
    let descriptor = |media: &str, (digest, size): (&str, u64)| {
        let digest: oci_spec::image::Digest = digest.parse().expect("a sha256 digest this module computed");
        Descriptor::new(MediaType::from(media), size, digest)
    };
    let mut layer_descriptor = descriptor(LAYER_MEDIA_TYPE, layer);
    // One annotation, so the HashMap's order cannot vary.
    layer_descriptor.set_annotations(Some(HashMap::from([(TITLE_ANNOTATION.to_owned(), title.to_owned())])));
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .artifact_type(MediaType::from(ARTIFACT_TYPE))
        .config(descriptor(CONFIG_MEDIA_TYPE, config))
        .layers(vec![layer_descriptor])
        .build()
        .expect("every required field is set");
    serde_json::to_vec(&manifest).expect("a manifest serialises")
}

/// A pulled manifest, checked to be a bundle artifact.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub layer_digest: String,
    pub layer_size: u64,
    pub title: Option<String>,
    pub config_digest: String,
    pub config_size: u64,
    pub config_media_type: String,
    /// The manifest's own size (a referrer's `subject` descriptor names it).
    pub manifest_size: u64,
}

/// Checks a manifest's bytes: an OCI image manifest, `artifactType` ours if present, exactly
/// one layer of our media type with a sha256 digest. The error says what is wrong.
pub fn parse_manifest(bytes: &[u8]) -> Result<Artifact, String> {
    let m: ImageManifest = serde_json::from_slice(bytes).map_err(|e| format!("not an OCI image manifest: {e}"))?;
    if m.schema_version() != 2 {
        return Err(format!("schemaVersion is {}, not 2", m.schema_version()));
    }
    if let Some(t) = m.media_type()
        && t.to_string() != MANIFEST_MEDIA_TYPE
    {
        return Err(format!("its mediaType is {t}, not {MANIFEST_MEDIA_TYPE}"));
    }
    if let Some(t) = m.artifact_type()
        && t.to_string() != ARTIFACT_TYPE
    {
        return Err(format!("its artifactType is {t}, not {ARTIFACT_TYPE}"));
    }
    let [layer] = m.layers().as_slice() else {
        return Err(format!("it has {} layers; a bundle artifact has exactly one", m.layers().len()));
    };
    if layer.media_type().to_string() != LAYER_MEDIA_TYPE {
        return Err(format!("its layer's mediaType is {}, not {LAYER_MEDIA_TYPE}", layer.media_type()));
    }
    let digest = layer.digest().to_string();
    if !super::reference::valid_digest(&digest) {
        return Err(format!("its layer's digest {digest} is not a sha256 digest"));
    }
    let config = m.config();
    Ok(Artifact {
        layer_digest: digest,
        layer_size: layer.size(),
        title: layer.annotations().as_ref().and_then(|a| a.get(TITLE_ANNOTATION)).cloned(),
        config_digest: config.digest().to_string(),
        config_size: config.size(),
        config_media_type: config.media_type().to_string(),
        manifest_size: bytes.len() as u64,
    })
}

/// What went wrong while reading a blob through [`CheckedReader`]: the bytes are not the
/// descriptor's (`transport == false`: `blob_mismatch`), or the transfer failed
/// (`transport == true`: `io_error`; whatever a consumer made of the bytes before is moot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobMismatch {
    pub message: String,
    pub transport: bool,
}

/// Reads a blob while holding it to its descriptor: it yields at most `size` bytes, then
/// requires the end; at the end the count must be `size` and the sha256 `digest`. A mismatch
/// is recorded (see [`CheckedReader::mismatch`]) and returned as an `InvalidData` error, so
/// whatever consumes the stream stops. Nothing read may be trusted before [`Self::finish`].
pub struct CheckedReader<R> {
    inner: R,
    expected_digest: String,
    size: u64,
    hash: Sha256Counter,
    done: bool,
    mismatch: Arc<Mutex<Option<BlobMismatch>>>,
}

impl<R: Read> CheckedReader<R> {
    pub fn new(inner: R, digest: &str, size: u64) -> Self {
        CheckedReader {
            inner,
            expected_digest: digest.to_owned(),
            size,
            hash: Sha256Counter::default(),
            done: false,
            mismatch: Arc::default(),
        }
    }

    /// A handle on the verdict, readable after the reader was moved into a consumer.
    pub fn mismatch(&self) -> Arc<Mutex<Option<BlobMismatch>>> {
        Arc::clone(&self.mismatch)
    }

    fn fail(&mut self, why: String) -> io::Error {
        *self.mismatch.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(BlobMismatch { message: why.clone(), transport: false });
        io::Error::new(io::ErrorKind::InvalidData, why)
    }

    /// Reads from the source, recording a failure of the transfer itself.
    fn read_inner(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            let mut slot = self.mismatch.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(BlobMismatch { message: e.to_string(), transport: true });
            }
        })
    }

    /// Reads what is left (bounded by the declared size) and checks the blob.
    pub fn finish(mut self) -> Result<(), BlobMismatch> {
        let mut buf = vec![0; 64 << 10];
        loop {
            match self.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    let recorded = self.mismatch.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    return Err(recorded.unwrap_or_else(|| BlobMismatch { message: e.to_string(), transport: true }));
                }
            }
        }
        match self.mismatch.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            Some(m) => Err(m),
            None => Ok(()),
        }
    }
}

impl<R: Read> Read for CheckedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        let left = self.size - self.hash.bytes;
        if left == 0 {
            // The declared end: the server must have nothing more.
            let mut probe = [0u8; 1];
            if self.read_inner(&mut probe)? != 0 {
                return Err(
                    self.fail(format!("the blob is larger than the {} bytes its descriptor declares", self.size))
                );
            }
            self.done = true;
            let digest = std::mem::take(&mut self.hash).digest();
            if digest != self.expected_digest {
                return Err(self.fail(format!(
                    "the registry served a blob whose sha256 is {digest}, not the {} the manifest names",
                    self.expected_digest
                )));
            }
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.read_inner(&mut buf[..want])?;
        if n == 0 {
            let got = self.hash.bytes;
            return Err(
                self.fail(format!("the blob ended after {got} of the {} bytes its descriptor declares", self.size))
            );
        }
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(r: &mut impl Read) -> io::Result<Vec<u8>> {
        let mut v = Vec::new();
        r.read_to_end(&mut v).map(|_| v)
    }

    #[test]
    fn checked_reader_accepts_only_the_declared_blob() {
        let blob = b"bundle bytes".to_vec();
        let digest = sha256_digest(&blob);
        let mut ok = CheckedReader::new(&blob[..], &digest, blob.len() as u64);
        assert_eq!(read_all(&mut ok).unwrap(), blob);
        assert!(ok.finish().is_ok());
        let longer = [&blob[..], b"!"].concat();
        let mut r = CheckedReader::new(&longer[..], &digest, blob.len() as u64);
        assert!(read_all(&mut r).is_err());
        assert!(r.finish().unwrap_err().message.contains("larger"));
        let r = CheckedReader::new(&blob[..5], &digest, blob.len() as u64);
        assert!(r.finish().unwrap_err().message.contains("ended after 5"));
        let other = b"bundle bytez".to_vec();
        let r = CheckedReader::new(&other[..], &digest, blob.len() as u64);
        assert!(r.finish().unwrap_err().message.contains("sha256"));
    }

    #[test]
    fn manifests_are_reproducible_and_parse_back() {
        let a = manifest_bytes((&sha256_digest(b"c"), 1), (&sha256_digest(b"l"), 1), "x.agent.bundle");
        let b = manifest_bytes((&sha256_digest(b"c"), 1), (&sha256_digest(b"l"), 1), "x.agent.bundle");
        assert_eq!(a, b);
        let text = String::from_utf8(a.clone()).unwrap();
        assert!(text.starts_with(r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.agent-bundle.v1""#), "{text}");
        let art = parse_manifest(&a).unwrap();
        assert_eq!(art.title.as_deref(), Some("x.agent.bundle"));
        let two = text.replace(r#""layers":["#, r#""layers":[{"mediaType":"application/vnd.agent-bundle.v1.tar+zstd","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":1},"#);
        assert!(parse_manifest(two.as_bytes()).unwrap_err().contains("2 layers"));
        let foreign = text.replace(LAYER_MEDIA_TYPE, "application/vnd.oci.image.layer.v1.tar");
        assert!(parse_manifest(foreign.as_bytes()).unwrap_err().contains("mediaType"));
    }

    /// Issue 23 item 4: a config of millions of empty strings is refused within the JSON caps.
    #[test]
    fn a_config_beyond_the_json_caps_is_refused() {
        let mut big = String::from("{\"tools\": [");
        big.push_str(&vec!["\"\""; 1_000_000].join(","));
        big.push_str("]}");
        let why = parse_config(big.as_bytes()).unwrap_err();
        assert!(why.contains("more than 200000 JSON values"), "{why}");
        let ok = parse_config(br#"{"name": "mailer", "tools": ["a"]}"#).unwrap();
        assert_eq!(ok.name.as_deref(), Some("mailer"));
        assert_eq!(parse_config(b"not json").unwrap(), Config::default());
    }
}
