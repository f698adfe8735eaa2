//! The Python binding `agent_bundle._native`: a thin layer over the library's supported API
//! (`agent_bundle::api`). Verification runs with the GIL released; a loaded bundle's files are
//! served from the bytes that were verified, never from its path. The Python package
//! (`agent_bundle/__init__.py`) re-exports everything, and `_native.pyi` types it.

use std::path::PathBuf;
use std::time::SystemTime;

use agent_bundle::api::{self, Bundle, Error, TrustedKeys as ApiKeys, VerifyOptions};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

create_exception!(agent_bundle, AgentBundleError, PyException, "Base class: every error carries a stable `code`.");
create_exception!(
    agent_bundle,
    BundleRejected,
    AgentBundleError,
    "The bundle was judged and refused; `code` is the reason code, `verdict` the full verdict."
);
create_exception!(
    agent_bundle,
    ContractDrift,
    AgentBundleError,
    "A risky tool's live contract is not the signed or approved one; `report` says which."
);
create_exception!(
    agent_bundle,
    VerificationError,
    AgentBundleError,
    "No judgement could be made (io_error, usage, key_error, state_error)."
);
create_exception!(agent_bundle, InvalidTool, AgentBundleError, "A tool definition that is not a tools.json tool.");
create_exception!(
    agent_bundle,
    McpBlocked,
    AgentBundleError,
    "The MCP guard refused a list, a call or a result; `code` is the guard code, `rpc_code` the JSON-RPC error code, `tool` the tool."
);

/// A Python exception of `kind` with `code` (and more attributes) set.
fn raise<T: pyo3::PyTypeInfo>(py: Python<'_>, message: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let err = PyErr::from_type(T::type_object(py), message);
    let value = err.value(py);
    for (k, v) in attrs {
        let _ = value.setattr(*k, v.bind(py));
    }
    err
}

fn to_py_err(py: Python<'_>, e: Error) -> PyErr {
    let code = e.code();
    let message = e.to_string();
    let code_obj: Py<PyAny> = PyString::new(py, code).into_any().unbind();
    match e {
        Error::Refused(v) => {
            let verdict = match Py::new(py, Verdict::from_api(&v)) {
                Ok(v) => v.into_any(),
                Err(e) => return e,
            };
            raise::<BundleRejected>(py, message, &[("code", code_obj), ("verdict", verdict)])
        }
        Error::Failed { code: api::FailureCode::InvalidTool, .. } => {
            raise::<InvalidTool>(py, message, &[("code", code_obj)])
        }
        _ => raise::<VerificationError>(py, message, &[("code", code_obj)]),
    }
}

/// The keys a bundle must be signed by.
#[pyclass(module = "agent_bundle", frozen)]
#[derive(Clone)]
struct TrustedKeys(ApiKeys);

#[pymethods]
impl TrustedKeys {
    /// Parses the text of a minisign public key file or a trusted-keys file.
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str) -> PyResult<TrustedKeys> {
        ApiKeys::parse(text).map(TrustedKeys).map_err(|e| to_py_err(py, e))
    }

    /// Reads a minisign public key file or a trusted-keys file.
    #[staticmethod]
    fn read(py: Python<'_>, path: PathBuf) -> PyResult<TrustedKeys> {
        ApiKeys::read(path).map(TrustedKeys).map_err(|e| to_py_err(py, e))
    }
}

/// `trusted_keys`: a TrustedKeys, a path, or a list of those.
fn keys_of(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<ApiKeys> {
    if let Ok(k) = value.extract::<TrustedKeys>() {
        return Ok(k.0);
    }
    if let Ok(path) = value.extract::<PathBuf>() {
        return ApiKeys::read(path).map_err(|e| to_py_err(py, e));
    }
    if let Ok(list) = value.cast::<PyList>() {
        let mut all: Option<ApiKeys> = None;
        for item in list.iter() {
            let k = keys_of(py, &item)?;
            all = Some(match all {
                Some(a) => a.merge(k),
                None => k,
            });
        }
        return all.ok_or_else(|| PyValueError::new_err("trusted_keys is an empty list"));
    }
    Err(PyTypeError::new_err("trusted_keys must be a TrustedKeys, a path, or a list of those"))
}

/// `now`: a datetime (its `.timestamp()`), or seconds since the epoch.
fn time_of(value: &Bound<'_, PyAny>) -> PyResult<SystemTime> {
    let seconds: f64 =
        if value.hasattr("timestamp")? { value.call_method0("timestamp")?.extract()? } else { value.extract()? };
    if !seconds.is_finite() {
        return Err(PyValueError::new_err("now must be a finite time"));
    }
    // The checked conversion: `now=1e20` is out of range, not a panic inside the extension.
    api::time_from_unix_seconds(seconds).ok_or_else(|| PyValueError::new_err("now is out of range"))
}

/// A signed trust policy (`bundle verify --trust-policy`).
#[pyclass(module = "agent_bundle", frozen)]
#[derive(Clone)]
struct TrustPolicy(api::TrustPolicy);

#[pymethods]
impl TrustPolicy {
    /// Reads a policy file and its signatures beside it (FILE.minisigs).
    #[staticmethod]
    fn read(py: Python<'_>, path: PathBuf) -> PyResult<TrustPolicy> {
        api::TrustPolicy::read(path).map(TrustPolicy).map_err(|e| to_py_err(py, e))
    }

    /// A policy given as text, with the text of its signatures file ("" for none).
    #[staticmethod]
    #[pyo3(signature = (policy, signatures=""))]
    fn parse(py: Python<'_>, policy: &str, signatures: &str) -> PyResult<TrustPolicy> {
        api::TrustPolicy::parse(policy, signatures).map(TrustPolicy).map_err(|e| to_py_err(py, e))
    }

    #[getter]
    fn id(&self) -> String {
        self.0.id().to_owned()
    }

    #[getter]
    fn version(&self) -> u64 {
        self.0.version()
    }

    fn __repr__(&self) -> String {
        format!("TrustPolicy(id={:?}, version={})", self.0.id(), self.0.version())
    }
}

/// `trust_policy` and `policy_updates` items: a TrustPolicy or a path.
fn policy_of(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<api::TrustPolicy> {
    if let Ok(p) = value.extract::<TrustPolicy>() {
        return Ok(p.0);
    }
    if let Ok(path) = value.extract::<PathBuf>() {
        return api::TrustPolicy::read(path).map_err(|e| to_py_err(py, e));
    }
    Err(PyTypeError::new_err("a trust policy must be a TrustPolicy or a path"))
}

/// Sets one GitHub workflow claim on a keyless requirement.
type ClaimSetter = fn(api::Keyless, String) -> api::Keyless;

/// A keyless (Sigstore) signature the bundle file must carry, judged offline.
#[pyclass(module = "agent_bundle", frozen)]
#[derive(Clone)]
struct Keyless(api::Keyless);

#[pymethods]
impl Keyless {
    #[new]
    #[pyo3(signature = (sigstore_bundle, trusted_root, *, identity=None, identity_regexp=None, issuer=None,
        issuer_regexp=None, github_workflow_repository=None, github_workflow_ref=None, github_workflow_sha=None,
        github_workflow_trigger=None, github_workflow_name=None, runner_environment=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        sigstore_bundle: PathBuf,
        trusted_root: PathBuf,
        identity: Option<String>,
        identity_regexp: Option<String>,
        issuer: Option<String>,
        issuer_regexp: Option<String>,
        github_workflow_repository: Option<String>,
        github_workflow_ref: Option<String>,
        github_workflow_sha: Option<String>,
        github_workflow_trigger: Option<String>,
        github_workflow_name: Option<String>,
        runner_environment: Option<String>,
    ) -> PyResult<Keyless> {
        let mut k = api::Keyless::new(sigstore_bundle, trusted_root);
        if let Some(v) = identity {
            k = k.identity(v);
        }
        if let Some(v) = identity_regexp {
            k = k.identity_regexp(v);
        }
        if let Some(v) = issuer {
            k = k.issuer(v);
        }
        if let Some(v) = issuer_regexp {
            k = k.issuer_regexp(v);
        }
        let claims: [(Option<String>, ClaimSetter); 6] = [
            (github_workflow_repository, |k, v| k.github_workflow_repository(v)),
            (github_workflow_ref, |k, v| k.github_workflow_ref(v)),
            (github_workflow_sha, |k, v| k.github_workflow_sha(v)),
            (github_workflow_trigger, |k, v| k.github_workflow_trigger(v)),
            (github_workflow_name, |k, v| k.github_workflow_name(v)),
            (runner_environment, |k, v| k.runner_environment(v)),
        ];
        for (value, set) in claims {
            if let Some(v) = value {
                k = set(k, v);
            }
        }
        // The library's one constructor of the identity rules, at once (code `usage`).
        Python::attach(|py| k.check().map_err(|e| to_py_err(py, e)))?;
        Ok(Keyless(k))
    }
}

/// The keyword arguments `verify` and `open_verified` share: the options of `bundle verify`.
struct GateKwargs<'a, 'py> {
    trusted_keys: Option<&'a Bound<'py, PyAny>>,
    trust_policy: Option<&'a Bound<'py, PyAny>>,
    policy_updates: Option<&'a Bound<'py, PyAny>>,
    cosignatures: Vec<PathBuf>,
    name: Option<String>,
    min_version: Option<String>,
    baseline: Option<PathBuf>,
    state: Option<PathBuf>,
    now: Option<&'a Bound<'py, PyAny>>,
    attestations: Vec<PathBuf>,
    discover_attestations: bool,
    require_provenance: bool,
    source_repo: Option<String>,
    source_ref: Option<String>,
    builder_id: Option<String>,
    keyless: Option<Keyless>,
    models_trusted_root: Option<PathBuf>,
    max_loaded_bytes: Option<u64>,
}

impl GateKwargs<'_, '_> {
    fn options(self, py: Python<'_>) -> PyResult<VerifyOptions> {
        let mut o = match (self.trusted_keys, self.trust_policy) {
            (Some(k), None) => VerifyOptions::new(keys_of(py, k)?),
            (None, Some(p)) => VerifyOptions::with_trust_policy(policy_of(py, p)?),
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err("give trusted_keys or trust_policy, not both"));
            }
            (None, None) => return Err(PyTypeError::new_err("trusted_keys or trust_policy is required")),
        };
        if self.trust_policy.is_none() && (self.policy_updates.is_some() || !self.cosignatures.is_empty()) {
            return Err(PyValueError::new_err("policy_updates and cosignatures need a trust_policy"));
        }
        if let Some(updates) = self.policy_updates {
            for u in updates.try_iter()? {
                o = o.policy_update(policy_of(py, &u?)?);
            }
        }
        for c in self.cosignatures {
            o = o.cosignatures(c);
        }
        if let Some(n) = self.name {
            o = o.name(n);
        }
        if let Some(v) = self.min_version {
            o = o.min_version(v);
        }
        if let Some(b) = self.baseline {
            o = o.baseline(b);
        }
        if let Some(s) = self.state {
            o = o.state(s);
        }
        if let Some(t) = self.now {
            o = o.now(time_of(t)?);
        }
        for a in self.attestations {
            o = o.attestation(a);
        }
        o = o.discover_attestations(self.discover_attestations).require_provenance(self.require_provenance);
        if let Some(v) = self.source_repo {
            o = o.source_repo(v);
        }
        if let Some(v) = self.source_ref {
            o = o.source_ref(v);
        }
        if let Some(v) = self.builder_id {
            o = o.builder_id(v);
        }
        if let Some(k) = self.keyless {
            o = o.keyless(k.0);
        }
        if let Some(root) = self.models_trusted_root {
            o = o.models_trusted_root(root);
        }
        if let Some(m) = self.max_loaded_bytes {
            o = o.max_loaded_bytes(m);
        }
        Ok(o)
    }
}

/// A path or bytes, turned into a bundle while the GIL is held (the file is opened here).
fn bundle_of(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Bundle> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Bundle::from_bytes(bytes.as_bytes()));
    }
    if let Ok(path) = value.extract::<PathBuf>() {
        return Bundle::open(path).map_err(|e| to_py_err(py, e));
    }
    Err(PyTypeError::new_err("the bundle must be a path (str or os.PathLike) or bytes"))
}

/// One finding: why a bundle is refused, or a warning.
#[pyclass(module = "agent_bundle", frozen, get_all)]
#[derive(Clone)]
struct Reason {
    code: String,
    path: Option<String>,
    tool: Option<String>,
    message: String,
}

#[pymethods]
impl Reason {
    fn __repr__(&self, py: Python<'_>) -> String {
        let r = |v: Option<&str>| py_repr(py, v);
        format!(
            "Reason(code={}, path={}, tool={}, message={})",
            r(Some(&self.code)),
            r(self.path.as_deref()),
            r(self.tool.as_deref()),
            r(Some(&self.message))
        )
    }
}

fn reasons(list: &[api::Finding]) -> Vec<Reason> {
    list.iter()
        .map(|f| Reason {
            code: f.code.as_str().to_owned(),
            path: f.path.clone(),
            tool: f.tool.clone(),
            message: f.message.clone(),
        })
        .collect()
}

/// One tool of a verified bundle: its risk class and contract fingerprint.
#[pyclass(module = "agent_bundle", frozen, get_all)]
#[derive(Clone)]
struct Tool {
    id: String,
    risk: Vec<&'static str>,
    read_only: bool,
    fingerprint: String,
    contract: String,
}

#[pymethods]
impl Tool {
    fn __repr__(&self, py: Python<'_>) -> String {
        let risk: Vec<String> = self.risk.iter().map(|r| py_repr(py, Some(r))).collect();
        format!(
            "Tool(id={}, risk=[{}], fingerprint={})",
            py_repr(py, Some(&self.id)),
            risk.join(", "),
            py_repr(py, Some(&self.fingerprint))
        )
    }
}

impl Tool {
    fn from_api(t: &api::ToolContract) -> Tool {
        Tool {
            id: t.id().to_owned(),
            risk: t.risk().names(),
            read_only: t.risk().is_read_only(),
            fingerprint: t.fingerprint().to_owned(),
            contract: t.canonical().to_owned(),
        }
    }
}

/// The gate's judgement of one bundle.
#[pyclass(module = "agent_bundle", frozen)]
struct Verdict {
    inner: api::Verdict,
}

impl Verdict {
    fn from_api(v: &api::Verdict) -> Verdict {
        Verdict { inner: v.clone() }
    }
}

#[pymethods]
impl Verdict {
    /// Whether every check passed.
    #[getter]
    fn ok(&self) -> bool {
        self.inner.is_ok()
    }
    /// The reason code of a refusal; None when it passed.
    #[getter]
    fn code(&self) -> Option<&'static str> {
        self.inner.code().map(|c| c.as_str())
    }
    #[getter]
    fn reasons(&self) -> Vec<Reason> {
        reasons(self.inner.reasons())
    }
    #[getter]
    fn warnings(&self) -> Vec<Reason> {
        reasons(self.inner.warnings())
    }
    #[getter]
    fn agent(&self) -> Option<String> {
        self.inner.agent().map(|a| a.name.clone())
    }
    #[getter]
    fn version(&self) -> Option<String> {
        self.inner.agent().map(|a| a.version.clone())
    }
    #[getter]
    fn signer(&self) -> Option<String> {
        self.inner.signer().map(str::to_owned)
    }
    #[getter]
    fn tools(&self) -> Vec<Tool> {
        self.inner.tools().iter().map(Tool::from_api).collect()
    }
    #[getter]
    fn files(&self) -> Vec<String> {
        self.inner.files().iter().map(|f| f.path.clone()).collect()
    }
    /// The JSON document `bundle verify --format json` prints, as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, self.inner.to_json())
    }
    /// Under a trust policy: each signature and each rule, as in `to_dict()["signers"]`.
    #[getter]
    fn signers<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner.to_json().get("signers").map(|v| json_to_py(py, v)).transpose()
    }
    /// Every attestation judged, with its verdict, as in `to_dict()["attestations"]`.
    #[getter]
    fn attestations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let none = serde_json::Value::Array(Vec::new());
        json_to_py(py, self.inner.to_json().get("attestations").unwrap_or(&none))
    }
    /// The keyless signer that verified, as in `to_dict()["keyless"]`.
    #[getter]
    fn keyless<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner.to_json().get("keyless").map(|v| json_to_py(py, v)).transpose()
    }
    fn __bool__(&self) -> bool {
        self.inner.is_ok()
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        let r = |v: Option<&str>| py_repr(py, v);
        match (self.inner.code(), self.inner.agent()) {
            (None, Some(a)) => format!("Verdict(ok=True, agent={}, version={})", r(Some(&a.name)), r(Some(&a.version))),
            (code, _) => format!("Verdict(ok=False, code={})", r(code.map(|c| c.as_str()))),
        }
    }
}

/// `value` as Python's `repr` writes it: `'text'` or `None`.
fn py_repr(py: Python<'_>, value: Option<&str>) -> String {
    match value {
        None => "None".to_owned(),
        Some(text) => PyString::new(py, text).repr().map_or_else(|_| format!("{text:?}"), |r| r.to_string()),
    }
}

/// A JSON value as Python objects (through `json.loads`).
fn json_to_py<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Judges a bundle (a path or bytes) with the gate of `bundle verify`; the GIL is released
/// while it runs. A refusal is a Verdict with ok False, not an exception.
#[pyfunction]
#[pyo3(signature = (bundle, *, trusted_keys=None, trust_policy=None, policy_updates=None, cosignatures=None,
    name=None, min_version=None, baseline=None, state=None, now=None, attestations=None,
    discover_attestations=true, require_provenance=false, source_repo=None, source_ref=None, builder_id=None,
    keyless=None, models_trusted_root=None))]
#[allow(clippy::too_many_arguments)]
fn verify<'py>(
    py: Python<'py>,
    bundle: &Bound<'py, PyAny>,
    trusted_keys: Option<&Bound<'py, PyAny>>,
    trust_policy: Option<&Bound<'py, PyAny>>,
    policy_updates: Option<&Bound<'py, PyAny>>,
    cosignatures: Option<Vec<PathBuf>>,
    name: Option<String>,
    min_version: Option<String>,
    baseline: Option<PathBuf>,
    state: Option<PathBuf>,
    now: Option<&Bound<'py, PyAny>>,
    attestations: Option<Vec<PathBuf>>,
    discover_attestations: bool,
    require_provenance: bool,
    source_repo: Option<String>,
    source_ref: Option<String>,
    builder_id: Option<String>,
    keyless: Option<Keyless>,
    models_trusted_root: Option<PathBuf>,
) -> PyResult<Verdict> {
    let opts = GateKwargs {
        trusted_keys,
        trust_policy,
        policy_updates,
        cosignatures: cosignatures.unwrap_or_default(),
        name,
        min_version,
        baseline,
        state,
        now,
        attestations: attestations.unwrap_or_default(),
        discover_attestations,
        require_provenance,
        source_repo,
        source_ref,
        builder_id,
        keyless,
        models_trusted_root,
        max_loaded_bytes: None,
    }
    .options(py)?;
    let bundle = bundle_of(py, bundle)?;
    let verdict = py.detach(move || bundle.verify(&opts));
    verdict.map(|v| Verdict { inner: v }).map_err(|e| to_py_err(py, e))
}

/// A bundle that passed the gate, its entries held as they were verified.
#[pyclass(module = "agent_bundle")]
struct VerifiedBundle {
    agent: Option<api::VerifiedAgent>,
}

impl VerifiedBundle {
    fn agent(&self) -> PyResult<&api::VerifiedAgent> {
        self.agent.as_ref().ok_or_else(|| PyValueError::new_err("the verified bundle is closed"))
    }
}

#[pymethods]
impl VerifiedBundle {
    /// The verdict (it passed).
    #[getter]
    fn verdict(&self) -> PyResult<Verdict> {
        Ok(Verdict::from_api(self.agent()?.verdict()))
    }
    /// The paths of every entry, in bundle order.
    fn paths(&self) -> PyResult<Vec<String>> {
        Ok(self.agent()?.entries().map(|(p, _, _)| p.to_owned()).collect())
    }
    /// The verified bytes of one entry; KeyError when the bundle has none at that path.
    fn read<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyBytes>> {
        match self.agent()?.file(path) {
            Some(bytes) => Ok(PyBytes::new(py, bytes)),
            None => Err(PyKeyError::new_err(path.to_owned())),
        }
    }
    /// The verified text (UTF-8) of one entry.
    fn read_text(&self, path: &str) -> PyResult<String> {
        match self.agent()?.file(path) {
            Some(bytes) => {
                String::from_utf8(bytes.to_vec()).map_err(|_| PyValueError::new_err(format!("{path} is not UTF-8")))
            }
            None => Err(PyKeyError::new_err(path.to_owned())),
        }
    }
    /// Whether the entry is executable.
    fn is_executable(&self, path: &str) -> PyResult<bool> {
        self.agent()?
            .entries()
            .find(|(p, _, _)| *p == path)
            .map(|(_, x, _)| x)
            .ok_or_else(|| PyKeyError::new_err(path.to_owned()))
    }
    /// `(path, bytes)` of every entry, in bundle order.
    fn files<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyBytes>)>> {
        Ok(self.agent()?.entries().map(|(p, _, b)| (p.to_owned(), PyBytes::new(py, b))).collect())
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = PyList::new(py, self.files(py)?)?;
        list.call_method0("__iter__")
    }
    fn __contains__(&self, path: &str) -> PyResult<bool> {
        Ok(self.agent()?.file(path).is_some())
    }
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.agent()?.entries().count())
    }
    /// A ContractGate against the contracts this bundle signed.
    #[pyo3(signature = (*, contract_enforcement="enforce"))]
    fn contract_gate(&self, contract_enforcement: &str) -> PyResult<ContractGate> {
        ContractGate::with(self.agent()?.contract_gate(), contract_enforcement)
    }
    /// The judge of `bundle guard` for MCP server `server`, over the tools this bundle signed
    /// for it (pins/<server>.mcp.json). `on_drift`: "block" or "warn-read-only".
    #[pyo3(signature = (server, *, on_drift="block", check_results=false))]
    fn mcp_guard(&self, py: Python<'_>, server: &str, on_drift: &str, check_results: bool) -> PyResult<McpGuard> {
        let warn = match on_drift {
            "block" => false,
            "warn-read-only" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "on_drift must be \"block\" or \"warn-read-only\", not {other:?}"
                )));
            }
        };
        let options = api::GuardOptions::default().warn_read_only(warn).check_results(check_results);
        let guard = self.agent()?.mcp_guard(server, options).map_err(|e| to_py_err(py, e))?;
        Ok(McpGuard { inner: guard })
    }
    /// Drops the held bytes; reads afterwards raise ValueError.
    fn close(&mut self) {
        self.agent = None;
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        match self.agent.as_ref().and_then(|a| a.verdict().agent().map(|m| (m.clone(), a.entries().count()))) {
            Some((m, files)) => format!(
                "VerifiedBundle(agent={}, version={}, files={files})",
                py_repr(py, Some(&m.name)),
                py_repr(py, Some(&m.version))
            ),
            None => "VerifiedBundle(closed)".to_owned(),
        }
    }
    #[getter]
    fn closed(&self) -> bool {
        self.agent.is_none()
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    #[pyo3(signature = (*_args))]
    fn __exit__(&mut self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}

/// Judges a bundle and keeps its entries as verified: reads never go back to the path. Raises
/// BundleRejected (with the verdict) when it is refused. Usable as a context manager.
/// With `lazy=True` (a bundle file): judges the signature and manifest only and returns a
/// LazyVerifiedBundle whose reads each decode one file's frames and check its signed BLAKE3;
/// options that need every byte raise VerificationError (code `usage`).
#[pyfunction]
#[pyo3(signature = (bundle, *, trusted_keys=None, trust_policy=None, policy_updates=None, cosignatures=None,
    name=None, min_version=None, baseline=None, state=None, now=None, attestations=None,
    discover_attestations=true, require_provenance=false, source_repo=None, source_ref=None, builder_id=None,
    keyless=None, models_trusted_root=None, max_loaded_bytes=None, lazy=false))]
#[allow(clippy::too_many_arguments)]
fn open_verified<'py>(
    py: Python<'py>,
    bundle: &Bound<'py, PyAny>,
    trusted_keys: Option<&Bound<'py, PyAny>>,
    trust_policy: Option<&Bound<'py, PyAny>>,
    policy_updates: Option<&Bound<'py, PyAny>>,
    cosignatures: Option<Vec<PathBuf>>,
    name: Option<String>,
    min_version: Option<String>,
    baseline: Option<PathBuf>,
    state: Option<PathBuf>,
    now: Option<&Bound<'py, PyAny>>,
    attestations: Option<Vec<PathBuf>>,
    discover_attestations: bool,
    require_provenance: bool,
    source_repo: Option<String>,
    source_ref: Option<String>,
    builder_id: Option<String>,
    keyless: Option<Keyless>,
    models_trusted_root: Option<PathBuf>,
    max_loaded_bytes: Option<u64>,
    lazy: bool,
) -> PyResult<Py<PyAny>> {
    let opts = GateKwargs {
        trusted_keys,
        trust_policy,
        policy_updates,
        cosignatures: cosignatures.unwrap_or_default(),
        name,
        min_version,
        baseline,
        state,
        now,
        attestations: attestations.unwrap_or_default(),
        discover_attestations,
        require_provenance,
        source_repo,
        source_ref,
        builder_id,
        keyless,
        models_trusted_root,
        max_loaded_bytes,
    }
    .options(py)?;
    let bundle = bundle_of(py, bundle)?;
    if lazy {
        let open = py.detach(move || bundle.open_lazy(&opts)).map_err(|e| to_py_err(py, e))?;
        return Ok(Py::new(py, LazyVerifiedBundle::new(open))?.into_any());
    }
    let agent = py.detach(move || bundle.load(&opts)).map_err(|e| to_py_err(py, e))?;
    Ok(Py::new(py, VerifiedBundle { agent: Some(agent) })?.into_any())
}

/// A bundle whose signature and manifest passed the gate's checks at open; each read decodes
/// only the frames of one file (an old one-frame bundle: from its start) and returns it once
/// its BLAKE3 is the signed one. Reads go back to the bundle file, each checked again, with the
/// GIL released; one read at a time (a lock), from any thread.
#[pyclass(module = "agent_bundle", frozen)]
struct LazyVerifiedBundle {
    inner: std::sync::Mutex<Option<api::LazyBundle>>,
    agent: api::AgentId,
    signer: String,
    seekable: bool,
    files: Vec<api::VerifiedFile>,
}

impl LazyVerifiedBundle {
    fn new(open: api::LazyBundle) -> LazyVerifiedBundle {
        LazyVerifiedBundle {
            agent: open.agent().clone(),
            signer: open.signer().to_owned(),
            seekable: open.is_seekable(),
            files: open.files().to_vec(),
            inner: std::sync::Mutex::new(Some(open)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<api::LazyBundle>> {
        // A read re-seeks the file each time: a panic in another read leaves nothing half done.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn listed(&self, path: &str) -> PyResult<&api::VerifiedFile> {
        match self.files.binary_search_by(|f| f.path.as_str().cmp(path)) {
            Ok(i) => Ok(&self.files[i]),
            Err(_) => Err(PyKeyError::new_err(path.to_owned())),
        }
    }

    fn read_bytes(&self, py: Python<'_>, path: &str) -> PyResult<Vec<u8>> {
        self.listed(path)?;
        let read = py.detach(|| {
            let mut guard = self.lock();
            guard.as_mut().map(|open| open.read(path))
        });
        match read {
            None => Err(PyValueError::new_err("the verified bundle is closed")),
            Some(Ok(Some(bytes))) => Ok(bytes),
            Some(Ok(None)) => Err(PyKeyError::new_err(path.to_owned())),
            Some(Err(e)) => Err(to_py_err(py, e)),
        }
    }
}

#[pymethods]
impl LazyVerifiedBundle {
    /// The agent's name, as the signed manifest states it.
    #[getter]
    fn agent(&self) -> String {
        self.agent.name.clone()
    }
    #[getter]
    fn version(&self) -> String {
        self.agent.version.clone()
    }
    /// The signing key's id (16 hex digits).
    #[getter]
    fn signer(&self) -> String {
        self.signer.clone()
    }
    /// Whether the bundle has a seek table (else each read decodes from its start).
    #[getter]
    fn seekable(&self) -> bool {
        self.seekable
    }
    /// The paths the signed manifest lists, in bundle order.
    fn paths(&self) -> Vec<String> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }
    /// The file's bytes once they have the signed BLAKE3; KeyError when the manifest does not
    /// list it, BundleRejected (code digest_mismatch, ...) when the file is not the signed one.
    fn read<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.read_bytes(py, path)?;
        Ok(PyBytes::new(py, &bytes))
    }
    /// The file's text (UTF-8), read as `read` does.
    fn read_text(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        let bytes = self.read_bytes(py, path)?;
        String::from_utf8(bytes).map_err(|_| PyValueError::new_err(format!("{path} is not UTF-8")))
    }
    /// The file's size in bytes, as signed.
    fn size(&self, path: &str) -> PyResult<u64> {
        Ok(self.listed(path)?.size)
    }
    /// The file's BLAKE3 (64 hex digits), as signed.
    fn blake3(&self, path: &str) -> PyResult<String> {
        Ok(self.listed(path)?.blake3.clone())
    }
    /// Whether the file is executable, as signed.
    fn is_executable(&self, path: &str) -> PyResult<bool> {
        Ok(self.listed(path)?.executable)
    }
    fn __contains__(&self, path: &str) -> bool {
        self.listed(path).is_ok()
    }
    fn __len__(&self) -> usize {
        self.files.len()
    }
    /// Closes the bundle file; reads afterwards raise ValueError.
    fn close(&self) {
        self.lock().take();
    }
    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "LazyVerifiedBundle(agent={}, version={}, files={}{})",
            py_repr(py, Some(&self.agent.name)),
            py_repr(py, Some(&self.agent.version)),
            self.files.len(),
            if self.closed() { ", closed" } else { "" }
        )
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}

/// A tool definition as JSON text: a str as is, anything else through `json.dumps`.
fn tool_text(py: Python<'_>, tool: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = tool.extract::<String>() {
        return Ok(s);
    }
    py.import("json")?.call_method1("dumps", (tool,))?.extract()
}

/// The contract of one tool definition (a tools.json tool, as a dict or JSON text): the same
/// function the gate fingerprints tools with.
#[pyfunction]
fn contract_fingerprint(py: Python<'_>, tool: &Bound<'_, PyAny>) -> PyResult<Tool> {
    let text = tool_text(py, tool)?;
    api::contract_fingerprint(&text).map(|c| Tool::from_api(&c)).map_err(|e| to_py_err(py, e))
}

/// One tool whose live contract is not the reference one.
#[pyclass(module = "agent_bundle", frozen, get_all)]
#[derive(Clone)]
struct ToolDrift {
    tool: String,
    new: bool,
    risk: Vec<&'static str>,
    expected: Option<String>,
    fingerprint: String,
    reason: String,
    changes: Vec<String>,
}

#[pymethods]
impl ToolDrift {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!("ToolDrift(tool={}, reason={})", py_repr(py, Some(&self.tool)), py_repr(py, Some(&self.reason)))
    }
}

#[pymethods]
impl DriftReport {
    fn __repr__(&self, py: Python<'_>) -> String {
        let tools = |list: &[ToolDrift]| list.iter().map(|d| py_repr(py, Some(&d.tool))).collect::<Vec<_>>().join(", ");
        format!(
            "DriftReport(ok={}, drift=[{}], warnings=[{}], missing=[{}])",
            if self.ok { "True" } else { "False" },
            tools(&self.drift),
            tools(&self.warnings),
            self.missing.iter().map(|m| py_repr(py, Some(m))).collect::<Vec<_>>().join(", ")
        )
    }
}

/// What a ContractGate found.
#[pyclass(module = "agent_bundle", frozen, get_all)]
struct DriftReport {
    ok: bool,
    drift: Vec<ToolDrift>,
    warnings: Vec<ToolDrift>,
    missing: Vec<String>,
}

fn drift_of(d: &api::ToolDrift) -> ToolDrift {
    ToolDrift {
        tool: d.tool.clone(),
        new: !d.known,
        risk: d.risk.names(),
        expected: d.expected.clone(),
        fingerprint: d.fingerprint.clone(),
        reason: d.reason.clone(),
        changes: d.changes.clone(),
    }
}

/// Compares the tools a runtime is about to expose with the signed (or approved) contracts.
/// With contract_enforcement="enforce", `check` raises ContractDrift for drift of a
/// write-capable, network, secret-using or destructive tool (or one whose http host moved);
/// read-only drift is only reported (`DriftReport.warnings`). With "warn", nothing raises.
#[pyclass(module = "agent_bundle", frozen)]
struct ContractGate {
    gate: api::ContractGate,
    enforce: bool,
}

impl ContractGate {
    fn with(gate: api::ContractGate, enforcement: &str) -> PyResult<ContractGate> {
        let enforce = match enforcement {
            "enforce" => true,
            "warn" => false,
            other => {
                return Err(PyValueError::new_err(format!(
                    "contract_enforcement must be \"enforce\" or \"warn\", not {other:?}"
                )));
            }
        };
        Ok(ContractGate { gate, enforce })
    }
}

#[pymethods]
impl ContractGate {
    /// `reference`: a VerifiedBundle or a passed Verdict (the contracts it signed), or the path
    /// of an approved baseline file. `schemas_from`: the VerifiedBundle whose files `schema:`
    /// references of the live definitions resolve in (a baseline holds no schema files).
    #[new]
    #[pyo3(signature = (reference, *, contract_enforcement="enforce", schemas_from=None))]
    fn new(
        py: Python<'_>,
        reference: &Bound<'_, PyAny>,
        contract_enforcement: &str,
        schemas_from: Option<PyRef<'_, VerifiedBundle>>,
    ) -> PyResult<ContractGate> {
        let gate = if let Ok(v) = reference.cast::<VerifiedBundle>() {
            v.borrow().agent()?.contract_gate()
        } else if let Ok(v) = reference.cast::<Verdict>() {
            api::ContractGate::from_verdict(&v.get().inner)
        } else if let Ok(path) = reference.extract::<PathBuf>() {
            api::ContractGate::from_baseline_file(path).map_err(|e| to_py_err(py, e))?
        } else {
            return Err(PyTypeError::new_err("reference must be a VerifiedBundle, a Verdict, or a baseline path"));
        };
        let gate = match &schemas_from {
            Some(agent) => gate.resolving_in(agent.agent()?),
            None => gate,
        };
        ContractGate::with(gate, contract_enforcement)
    }

    fn __repr__(&self) -> String {
        let enforcement = if self.enforce { "enforce" } else { "warn" };
        format!("ContractGate(contract_enforcement='{enforcement}')")
    }

    /// The reference fingerprint of a tool, or None.
    fn expected(&self, tool: &str) -> Option<String> {
        self.gate.expected(tool).map(str::to_owned)
    }

    /// Compares live tool definitions (dicts or JSON text of tools.json tools) with the
    /// reference.
    fn check(&self, py: Python<'_>, tools: &Bound<'_, PyAny>) -> PyResult<DriftReport> {
        let texts: Vec<String> = tools.try_iter()?.map(|t| tool_text(py, &t?)).collect::<PyResult<_>>()?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let report = self.gate.check(&refs).map_err(|e| to_py_err(py, e))?;
        let out = DriftReport {
            ok: report.is_ok(),
            drift: report.drift.iter().map(drift_of).collect(),
            warnings: report.warnings.iter().map(drift_of).collect(),
            missing: report.missing.clone(),
        };
        if self.enforce && !report.is_ok() {
            let list: Vec<String> = report.drift.iter().map(|d| format!("{} ({})", d.tool, d.reason)).collect();
            let message = format!("tool contracts not approved: {}", list.join("; "));
            let code: Py<PyAny> = PyString::new(py, "contract_drift").into_any().unbind();
            let report = Py::new(py, out)?.into_any();
            return Err(raise::<ContractDrift>(py, message, &[("code", code), ("report", report)]));
        }
        Ok(out)
    }
}

/// Every reason code with its description, in documentation order.
/// The judge of `bundle guard` in-process: filter a `tools/list` result to the tools the
/// bundle signed for one MCP server, check a call's arguments and a result. Refusals raise
/// McpBlocked with the guard's stable code.
#[pyclass(module = "agent_bundle")]
struct McpGuard {
    inner: api::McpGuard,
}

/// A Python value (dict, list, str of JSON) as JSON.
fn py_to_json(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let text = tool_text(py, value)?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn blocked(py: Python<'_>, r: api::GuardRefusal) -> PyErr {
    let code: Py<PyAny> = PyString::new(py, r.code()).into_any().unbind();
    let rpc: Py<PyAny> = match r.rpc_code() {
        Some(c) => c.into_pyobject(py).map(|v| v.into_any().unbind()).unwrap_or_else(|_| py.None()),
        None => py.None(),
    };
    let tool: Py<PyAny> = match r.tool() {
        Some(t) => PyString::new(py, t).into_any().unbind(),
        None => py.None(),
    };
    raise::<McpBlocked>(py, r.to_string(), &[("code", code), ("rpc_code", rpc), ("tool", tool)])
}

#[pymethods]
impl McpGuard {
    /// Judges a complete tools/list (its result dict, or the list of Tool dicts): returns
    /// {"tools": [...the tools to show...], "decisions": [{tool, decision, code, served,
    /// signed, changed}, ...]}. What it passes is then exactly what may be called.
    fn filter_tools<'py>(&mut self, py: Python<'py>, result: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let value = py_to_json(py, result)?;
        let list = self.inner.filter_tools(&value).map_err(|r| blocked(py, r))?;
        let decisions: Vec<serde_json::Value> = list
            .decisions
            .iter()
            .map(|d| {
                serde_json::json!({
                    "tool": d.tool(), "decision": d.decision(), "code": d.code(),
                    "served": d.served(), "signed": d.signed(), "changed": d.changed(),
                })
            })
            .collect();
        json_to_py(py, &serde_json::json!({"tools": list.tools, "decisions": decisions}))
    }
    /// Raises McpBlocked unless `name` was passed by the last filter_tools and `arguments`
    /// match its signed inputSchema.
    #[pyo3(signature = (name, arguments=None))]
    fn check_call(&self, py: Python<'_>, name: &str, arguments: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let arguments = arguments.map(|a| py_to_json(py, a)).transpose()?;
        self.inner.check_call(name, arguments.as_ref()).map_err(|r| blocked(py, r))
    }
    /// With check_results=True, raises McpBlocked when a result's structuredContent does not
    /// match the signed outputSchema.
    fn check_result(&self, py: Python<'_>, name: &str, result: &Bound<'_, PyAny>) -> PyResult<()> {
        let result = py_to_json(py, result)?;
        self.inner.check_result(name, &result).map_err(|r| blocked(py, r))
    }
    /// The names of the tools the bundle signed for the server.
    #[getter]
    fn pinned(&self) -> Vec<String> {
        self.inner.pinned()
    }
}

#[pyfunction]
fn reason_codes(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    for code in api::ReasonCode::all() {
        dict.set_item(code.as_str(), code.describe())?;
    }
    Ok(dict)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("AgentBundleError", py.get_type::<AgentBundleError>())?;
    m.add("BundleRejected", py.get_type::<BundleRejected>())?;
    m.add("ContractDrift", py.get_type::<ContractDrift>())?;
    m.add("VerificationError", py.get_type::<VerificationError>())?;
    m.add("InvalidTool", py.get_type::<InvalidTool>())?;
    m.add("McpBlocked", py.get_type::<McpBlocked>())?;
    m.add_class::<TrustedKeys>()?;
    m.add_class::<TrustPolicy>()?;
    m.add_class::<Keyless>()?;
    m.add_class::<Verdict>()?;
    m.add_class::<Reason>()?;
    m.add_class::<Tool>()?;
    m.add_class::<VerifiedBundle>()?;
    m.add_class::<LazyVerifiedBundle>()?;
    m.add_class::<ContractGate>()?;
    m.add_class::<McpGuard>()?;
    m.add_class::<DriftReport>()?;
    m.add_class::<ToolDrift>()?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(open_verified, m)?)?;
    m.add_function(wrap_pyfunction!(contract_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(reason_codes, m)?)?;
    Ok(())
}
