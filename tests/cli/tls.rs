//! RAP over https: `bundle import --from rap https://...` and `bundle check --refresh` against
//! an in-test HTTPS server on 127.0.0.1 whose certificate comes from a private test CA
//! (testdata/tls). With `--ca-cert` that CA is trusted; without it the fetch is a `tls_error`
//! (exit 2) and nothing is written.

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, RapServer, testdata};

fn time_tools() -> String {
    std::fs::read_to_string(testdata("import/rap/time-tools.json")).unwrap()
}

fn ca() -> String {
    testdata("tls/ca.pem").display().to_string()
}

#[test]
fn import_rap_over_https_trusts_a_private_root_given_with_ca_cert() {
    let server = RapServer::start_tls(&time_tools());
    let env = Env::new();
    let out = env.run(&["import", "--from", "rap", &server.url(), "--ca-cert", &ca(), "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    assert_eq!(j["document"]["tools"][0]["id"], "get_current_time");
    assert_eq!(j["document"]["tools"][0]["transport"]["url"], "https://time.example.com/invoke");
    // The certificate is for `localhost` as well as 127.0.0.1.
    let localhost = format!("https://localhost:{}", server.port);
    env.run(&["import", "--from", "rap", &localhost, "--ca-cert", &ca()]).expect_code(0);
}

#[test]
fn import_rap_over_https_without_ca_cert_is_a_tls_error() {
    let server = RapServer::start_tls(&time_tools());
    let env = Env::new();
    env.run(&["init", "agent"]).expect_code(0);
    let before = std::fs::read_to_string(env.path().join("agent/tools.json")).unwrap();
    let out =
        env.run(&["import", "--from", "rap", &server.url(), "-o", "agent/tools.json", "--force", "--format", "json"]);
    out.expect_code(2);
    let j = out.json();
    assert_eq!(j["ok"], false);
    let d = &j["diagnostics"][0];
    assert_eq!(j["diagnostics"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(d["code"], "tls_error");
    assert_eq!(d["file"], format!("{}/.well-known/rap-toolset", server.url()));
    let message = d["message"].as_str().unwrap();
    assert!(message.contains("UnknownIssuer"), "{message}");
    assert!(d["help"].as_str().unwrap().contains("--ca-cert"), "{d}");
    assert_eq!(std::fs::read_to_string(env.path().join("agent/tools.json")).unwrap(), before, "nothing is written");

    let human = env.run(&["import", "--from", "rap", &server.url()]);
    human.expect_code(2);
    assert_run_snapshot!(human);
    assert!(human.stdout.is_empty(), "{}", human.stdout);
}

#[test]
fn import_rap_over_https_rejects_a_certificate_for_another_name() {
    // The right CA, but the certificate names localhost and 127.0.0.1, not 127.0.0.2.
    if std::net::TcpListener::bind("127.0.0.2:0").is_err() {
        // Linux routes all of 127.0.0.0/8 to loopback; CI must run this test, never skip it.
        crate::support::skip(
            "127.0.0.2 as a local address",
            "a loopback that answers on 127/8",
            "BUNDLE_REQUIRE_TOOLS",
        );
        return;
    }
    let server = RapServer::start_tls_on(&time_tools(), "127.0.0.2");
    let out = crate::support::run(&["import", "--from", "rap", &server.url(), "--ca-cert", &ca(), "--format", "json"]);
    out.expect_code(2);
    let d = &out.json()["diagnostics"][0];
    assert_eq!(d["code"], "tls_error");
    assert!(d["message"].as_str().unwrap().contains("certificate not valid for name \"127.0.0.2\""), "{d}");
}

#[test]
fn ca_cert_must_hold_a_certificate() {
    let server = RapServer::start_tls(&time_tools());
    let key = testdata("tls/server.key").display().to_string();
    let out = crate::support::run(&["import", "--from", "rap", &server.url(), "--ca-cert", &key]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    let out = crate::support::run(&["import", "--from", "rap", &server.url(), "--ca-cert", "/nonexistent/ca.pem"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    // Without a server to trust it for, --ca-cert is a mistake rather than something to ignore.
    let file = testdata("import/rap/time-tools.json").display().to_string();
    let out = crate::support::run(&["import", "--from", "rap", &file, "--ca-cert", &ca()]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

#[test]
fn pin_and_refresh_over_https_with_ca_cert() {
    let body = time_tools();
    let server = RapServer::start_tls(&body);
    let env = Env::new();
    env.run(&["init", "agent"]).expect_code(0);
    env.run(&[
        "import",
        "--from",
        "rap",
        &server.url(),
        "--ca-cert",
        &ca(),
        "--pin",
        "-o",
        "agent/tools.json",
        "--force",
    ])
    .expect_code(0);
    let pinned = format!("pins/127.0.0.1_{}.rap.json", server.port);
    assert_eq!(std::fs::read_to_string(env.path().join("agent").join(&pinned)).unwrap(), body);
    env.run(&["lock", "-q", "agent"]).expect_code(0);

    env.run(&["check", "--refresh", "--ca-cert", &ca(), "agent"]).expect_code(0);

    let out = env.run(&["check", "--refresh", "agent", "--format", "json"]);
    out.expect_code(2);
    let d = &out.json()["diagnostics"][0];
    assert_eq!(d["code"], "tls_error");
    assert_eq!(d["file"], "agent/manifest.toml");
    assert_eq!(d["path"], format!("pins.\"{pinned}\".url"));
    assert!(d["help"].as_str().unwrap().contains("--refresh --ca-cert"), "{d}");

    // --ca-cert without --refresh is a usage error: check never uses the network without it.
    env.run(&["check", "--ca-cert", &ca(), "agent"]).expect_code(2);
}

#[test]
fn an_https_fetch_follows_redirects_only_to_https() {
    let plain = RapServer::start(&time_tools());
    let secure = RapServer::start_tls(&time_tools());
    let to_plain =
        RapServer::start_tls(&format!("{}{}/.well-known/rap-toolset", crate::support::REDIRECT, plain.url()));
    let env = Env::new();
    let out = env.run(&["import", "--from", "rap", &to_plain.url(), "--ca-cert", &ca(), "--format", "json"]);
    out.expect_code(2);
    let d = &out.json()["diagnostics"][0];
    assert_eq!(d["code"], "tls_error", "{d}");
    assert!(d["message"].as_str().unwrap().contains("redirected to a plain-http URL"), "{d}");
    assert!(!d["help"].as_str().unwrap().contains("--ca-cert"), "{d}");

    let to_secure =
        RapServer::start_tls(&format!("{}{}/.well-known/rap-toolset", crate::support::REDIRECT, secure.url()));
    let out = env.run(&["import", "--from", "rap", &to_secure.url(), "--ca-cert", &ca(), "--format", "json"]);
    out.expect_code(0);
    assert_eq!(out.json()["document"]["tools"][0]["id"], "get_current_time");
}
