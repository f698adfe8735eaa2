"""The ORAS Python client (oras-py) as a second registry client of our referrers.

Usage:
  referrers.py list HOST REPO SUBJECT_DIGEST OUTDIR
      Reads the referrers of SUBJECT_DIGEST the way the distribution spec's referrers tag
      schema says (oras-py has no referrers API call; Debian's docker-registry 2.8 has no
      referrers API): the image index under the tag `sha256-<hex>`, then each referrer's
      manifest, then its layers, saved in OUTDIR under their digest's hex. Prints one JSON
      document: {"index": ..., "manifests": {digest: manifest}}.
  referrers.py attach-legacy HOST REPO SUBJECT_DIGEST SUBJECT_SIZE ARTIFACT_TYPE=FILE...
      Attaches each FILE (a Sigstore bundle) as agent-bundle's releases before cosign's layout
      did: `artifactType` ARTIFACT_TYPE, the empty config, one layer, no annotations, and the
      fallback tag's index (no registry used here has the referrers API).
"""

import hashlib
import json
import os
import sys

import oras.client
import oras.container

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
SIGSTORE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def client(host):
    return oras.client.OrasClient(hostname=host, insecure=True)


def container(c, host, repo, ref):
    sep = "@" if ref.startswith("sha256:") else ":"
    return c.get_container(f"{host}/{repo}{sep}{ref}")


def list_referrers(host, repo, subject, outdir):
    c = client(host)
    tag = subject.replace(":", "-", 1)
    index = c.get_manifest(container(c, host, repo, tag), allowed_media_type=[INDEX])
    manifests = {}
    for entry in index["manifests"]:
        manifest = c.get_manifest(container(c, host, repo, entry["digest"]), allowed_media_type=[MANIFEST])
        manifests[entry["digest"]] = manifest
        for layer in manifest["layers"]:
            path = os.path.join(outdir, layer["digest"].split(":", 1)[1])
            c.download_blob(container(c, host, repo, entry["digest"]), layer["digest"], path)
            data = open(path, "rb").read()
            assert "sha256:" + hashlib.sha256(data).hexdigest() == layer["digest"], "layer digest"
    print(json.dumps({"index": index, "manifests": manifests}))


def attach_legacy(host, repo, subject, size, pairs):
    c = client(host)
    base = f"{host}/{repo}"
    empty = b"{}"
    entries = []
    for pair in pairs:
        artifact_type, path = pair.split("=", 1)
        data = open(path, "rb").read()
        for blob in (empty, data):
            digest = "sha256:" + hashlib.sha256(blob).hexdigest()
            tmp = os.path.join(os.path.dirname(os.path.abspath(path)), digest.split(":")[1] + ".blob")
            open(tmp, "wb").write(blob)
            c.upload_blob(tmp, c.get_container(base), {"digest": digest, "size": len(blob)})
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "artifactType": artifact_type,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": "sha256:" + hashlib.sha256(empty).hexdigest(), "size": 2},
            "layers": [{"mediaType": SIGSTORE, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}],
            "subject": {"mediaType": MANIFEST, "digest": subject, "size": int(size)},
        }
        body = json.dumps(manifest, separators=(",", ":")).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        put(c, container(c, host, repo, digest), MANIFEST, body)
        entries.append({"mediaType": MANIFEST, "digest": digest, "size": len(body), "artifactType": artifact_type})
    index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": entries}
    put(c, container(c, host, repo, subject.replace(":", "-", 1)), INDEX, json.dumps(index).encode())
    print(json.dumps(entries))


def put(c, target, media_type, body):
    """PUTs a manifest or index as these exact bytes (upload_manifest takes image manifests only)."""
    r = c.do_request(f"{c.prefix}://{target.manifest_url()}", "PUT", headers={"Content-Type": media_type}, data=body)
    assert r.status_code == 201, (r.status_code, r.text)


if __name__ == "__main__":
    if sys.argv[1] == "list":
        list_referrers(*sys.argv[2:6])
    elif sys.argv[1] == "attach-legacy":
        attach_legacy(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    else:
        raise SystemExit(__doc__)
