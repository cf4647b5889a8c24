//! Amazon Bedrock (crush(1) CONFIGURATION, Amazon Bedrock): the catalog's bedrock providers and the
//! user's, signed with SigV4 from every source of AWS credentials (checked by the fake server
//! against the request as it arrived), or a Bedrock API key; its event stream with faults; errors
//! that say what is wrong; and where AWS credentials may go.

use crate::support::bedrock::Auth;
use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::json;

const HAIKU: &str = "bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0";
const HAIKU_PATH: &str =
    "/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke-with-response-stream";

fn sigv4(region: &str, token: Option<&str>) -> Auth {
    Auth::SigV4 {
        access_key_id: "AKIDTEST".into(),
        secret: "secret/KEY+test".into(),
        session_token: token.map(str::to_string),
        region: region.into(),
    }
}

/// The environment of a run against `server` with the keys of [`sigv4`].
fn env_keys(server: &FakeServer) -> Vec<(String, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID".into(), "AKIDTEST".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "secret/KEY+test".into()),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".into(), server.url()),
        ("CRUSH_RETRY_BASE_MS".into(), "1".into()),
    ]
}

fn run(env: &TestEnv, args: &[&str], vars: &[(String, String)]) -> crate::support::Output {
    let v: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.run_with_env(args, &v)
}

#[test]
fn catalog_bedrock_signs_with_environment_keys_and_runs_a_tool_loop() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo made > f.txt; cat s.txt"})),
        Reply::text("all done").with_usage(50, 7, 1000, 20),
    ]);
    server.expect_bedrock_auth(sigv4("us-west-2", Some("SESSION/TOKEN")));
    let env = TestEnv::new();
    env.write_project_file("s.txt", "secret/KEY+test SESSION/TOKEN\n");
    let mut vars = env_keys(&server);
    vars.push(("AWS_SESSION_TOKEN".into(), "SESSION/TOKEN".into()));
    vars.push(("AWS_REGION".into(), "us-west-2".into()));
    let out = run(&env, &["run", "-y", "-m", HAIKU, "make f.txt"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("all done"), "{}", out.stdout);
    assert_eq!(env.read_project_file("f.txt"), "made\n");
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path, HAIKU_PATH);
    assert_eq!(reqs[0].dialect, Some(Dialect::Bedrock));
    assert_eq!(
        reqs[0].header("accept"),
        Some("application/vnd.amazon.eventstream")
    );
    // The tool result went back in the Messages form, with the Bedrock version.
    assert_eq!(reqs[1].body["anthropic_version"], "bedrock-2023-05-31");
    // The AWS secrets the provider signs with are masked in tool output.
    assert!(
        reqs[1].tool_results()[0]
            .1
            .starts_with("[masked AWS_SECRET_ACCESS_KEY] [masked AWS_SESSION_TOKEN]\n"),
        "{:?}",
        reqs[1].tool_results()
    );
    assert!(reqs[0].system_text().contains("crush") || !reqs[0].system_text().is_empty());
    // Usage as the events reported it, in the ledger.
    let stats = env.run(&["stats", "--json"], None);
    stats.assert_success();
    let v: serde_json::Value = serde_json::from_str(&stats.stdout).unwrap();
    let text = v.to_string();
    assert!(
        text.contains("1000") && text.contains("us.anthropic.claude-haiku"),
        "{text}"
    );
}

#[test]
fn a_reasoning_claude_model_gets_anthropic_thinking_not_openai_fields() {
    let server = FakeServer::with_script(vec![Reply::text("thought")]);
    server.expect_bedrock_auth(sigv4("us-east-1", None));
    let env = TestEnv::new();
    let out = run(
        &env,
        &["run", "-m", "bedrock/us.anthropic.claude-opus-5", "hi"],
        &env_keys(&server),
    );
    out.assert_success();
    let body = &server.model_requests()[0].body;
    // The catalog's default effort, as Anthropic's adaptive thinking.
    assert_eq!(body["thinking"]["type"], "adaptive");
    assert_eq!(body["output_config"], json!({"effort": "high"}));
    assert!(body.get("reasoning_effort").is_none(), "{body}");
}

#[test]
fn a_profile_with_keys_and_its_region_and_a_credential_process() {
    let server = FakeServer::with_script(vec![Reply::text("from dev")]);
    let env = TestEnv::new();
    let aws = env.home().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        "[dev]\naws_access_key_id = AKIDTEST\naws_secret_access_key = secret/KEY+test\n",
    )
    .unwrap();
    let script = env.home().join("creds.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '%s' '{\"Version\": 1, \"AccessKeyId\": \"AKIDTEST\", \"SecretAccessKey\": \"secret/KEY+test\", \"SessionToken\": \"PROC-TOKEN\", \"Expiration\": \"2999-01-01T00:00:00Z\"}'\n",
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile dev]\nregion = eu-central-1\n\n[profile proc]\nregion = eu-north-1\ncredential_process = sh {}\n",
            script.display()
        ),
    )
    .unwrap();
    let base = vec![
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".to_string(), server.url()),
        ("AWS_PROFILE".to_string(), "dev".to_string()),
    ];
    server.expect_bedrock_auth(sigv4("eu-central-1", None));
    let model = "bedrock-europe/eu.anthropic.claude-haiku-4-5-20251001-v1:0";
    let out = run(&env, &["run", "-m", model, "hi"], &base);
    out.assert_success();
    assert!(out.stdout.contains("from dev"));
    server.assert_clean();
    server.push(Reply::text("from proc"));
    server.expect_bedrock_auth(sigv4("eu-north-1", Some("PROC-TOKEN")));
    let mut vars = base.clone();
    vars[1].1 = "proc".into();
    let out = run(&env, &["run", "-m", model, "hi"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("from proc"));
}

/// An STS reply carrying the credentials of [`sigv4`] with `token`.
fn sts_reply(token: &str) -> Reply {
    Reply::raw(
        200,
        vec![("content-type", "text/xml")],
        format!(
            "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleResult>\
             <Credentials><AccessKeyId>AKIDTEST</AccessKeyId><SecretAccessKey>secret/KEY+test</SecretAccessKey>\
             <SessionToken>{token}</SessionToken><Expiration>2999-01-01T00:00:00Z</Expiration></Credentials>\
             </AssumeRoleResult></AssumeRoleResponse>"
        ),
    )
}

#[test]
fn a_role_is_assumed_at_sts_with_its_source_profiles_keys() {
    let server = FakeServer::with_script(vec![Reply::text("as the role")]);
    server.route_when(
        |r| r.method == "POST" && r.body_text.starts_with("Action=AssumeRole&"),
        vec![sts_reply("ROLE-TOKEN")],
    );
    let env = TestEnv::new();
    let aws = env.home().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        "[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = base-secret\n",
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile role]\nrole_arn = arn:aws:iam::111122223333:role/Dev\nsource_profile = base\n\
         role_session_name = me\nexternal_id = x/1\nregion = us-west-2\n\n\
         [profile loop-a]\nrole_arn = arn:aws:iam::1:role/A\nsource_profile = loop-b\n\n\
         [profile loop-b]\nrole_arn = arn:aws:iam::1:role/B\nsource_profile = loop-a\n\n\
         [profile mfa]\nrole_arn = arn:aws:iam::1:role/M\nsource_profile = base\nmfa_serial = arn:aws:iam::1:mfa/me\n",
    )
    .unwrap();
    let mut vars = vec![
        ("AWS_ENDPOINT_URL".to_string(), server.url()),
        ("AWS_PROFILE".to_string(), "role".to_string()),
    ];
    server.expect_bedrock_auth(sigv4("us-west-2", Some("ROLE-TOKEN")));
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("as the role"));
    let sts = &server.requests()[0];
    assert_eq!(
        sts.body_text,
        "Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A111122223333%3Arole%2FDev\
         &RoleSessionName=me&ExternalId=x%2F1"
    );
    // Signed with the source profile's keys, for STS in the profile's region.
    let auth = sts.header("authorization").unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDBASE/")
            && auth.contains("/us-west-2/sts/aws4_request"),
        "{auth}"
    );
    server.assert_clean();
    for (profile, want) in [("loop-a", "makes a loop"), ("mfa", "MFA code (mfa_serial)")] {
        vars[1].1 = profile.into();
        let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
        assert_eq!(out.code, 1, "{profile}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{profile}: {}", out.stderr);
    }
}

#[test]
fn an_ec2_instance_role_comes_from_the_instance_metadata_service() {
    let server = FakeServer::with_script(vec![Reply::text("as the instance")]);
    let text = |body: &str| Reply::raw(200, vec![("content-type", "text/plain")], body.to_string());
    server.route("PUT", "/latest/api/token", text("IMDS-SESSION"));
    server.route(
        "GET",
        "/latest/meta-data/iam/security-credentials/",
        text("DevBox\n"),
    );
    server.route(
        "GET",
        "/latest/meta-data/iam/security-credentials/DevBox",
        text(
            &json!({"Code": "Success", "AccessKeyId": "AKIDTEST",
                "SecretAccessKey": "secret/KEY+test", "Token": "INSTANCE-TOKEN",
                "Expiration": "2999-01-01T00:00:00Z"})
            .to_string(),
        ),
    );
    let env = TestEnv::new();
    let vars = vec![
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".to_string(), server.url()),
        (
            "AWS_EC2_METADATA_SERVICE_ENDPOINT".to_string(),
            server.url(),
        ),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
    ];
    server.expect_bedrock_auth(sigv4("us-east-1", Some("INSTANCE-TOKEN")));
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("as the instance"));
    let r = server.requests();
    assert_eq!(
        r[0].header("x-aws-ec2-metadata-token-ttl-seconds"),
        Some("21600")
    );
    for get in &r[1..3] {
        assert_eq!(get.header("x-aws-ec2-metadata-token"), Some("IMDS-SESSION"));
    }
}

#[test]
fn a_web_identity_token_is_exchanged_without_signing() {
    let server = FakeServer::with_script(vec![Reply::text("as the pod")]);
    server.route_when(
        |r| r.method == "POST" && r.body_text.starts_with("Action=AssumeRoleWithWebIdentity&"),
        vec![sts_reply("WEB-TOKEN")],
    );
    let env = TestEnv::new();
    let token = env.home().join("token");
    std::fs::write(&token, "eyJ.token\n").unwrap();
    let vars = vec![
        ("AWS_ENDPOINT_URL".to_string(), server.url()),
        (
            "AWS_ROLE_ARN".to_string(),
            "arn:aws:iam::1:role/Pod".to_string(),
        ),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE".to_string(),
            token.display().to_string(),
        ),
        ("AWS_ROLE_SESSION_NAME".to_string(), "pod".to_string()),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
    ];
    server.expect_bedrock_auth(sigv4("us-east-1", Some("WEB-TOKEN")));
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    let sts = &server.requests()[0];
    assert!(sts.header("authorization").is_none());
    assert_eq!(
        sts.body_text,
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2FPod\
         &RoleSessionName=pod&WebIdentityToken=eyJ.token"
    );
}

/// The SSO token cache file of session `crush-corp` (its name is the SHA-1 of the session).
const SSO_CACHE: &str = "b124012e1e685f5a22dffa9d9f4c6afcdeed7fc9.json";

fn sso_setup(env: &TestEnv, refresh: Option<&str>) {
    let aws = env.home().join(".aws");
    std::fs::create_dir_all(aws.join("sso").join("cache")).unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile corp]\nsso_session = crush-corp\nsso_account_id = 111122223333\nsso_role_name = Dev\nregion = us-east-2\n\n[sso-session crush-corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\n",
    )
    .unwrap();
    let mut provider = json!({"bedrock": {}});
    if let Some(cmd) = refresh {
        provider["bedrock"]["aws_auth_refresh"] = json!(cmd);
    }
    env.write_config(&json!({"providers": provider}));
}

fn sso_token(env: &TestEnv, expires: &str) {
    let f = env.home().join(".aws/sso/cache").join(SSO_CACHE);
    std::fs::write(
        f,
        json!({"startUrl": "https://corp.awsapps.com/start", "region": "us-east-1",
            "accessToken": "SSO-ACCESS", "expiresAt": expires})
        .to_string(),
    )
    .unwrap();
}

/// Profile `corp`, with every AWS endpoint at `server`.
fn sso_vars(server: &FakeServer) -> Vec<(String, String)> {
    vec![
        ("AWS_ENDPOINT_URL".to_string(), server.url()),
        ("AWS_PROFILE".to_string(), "corp".to_string()),
    ]
}

fn role_credentials_route(server: &FakeServer) {
    server.route(
        "GET",
        "/federation/credentials",
        Reply::raw(
            200,
            vec![("content-type", "application/json")],
            json!({"roleCredentials": {"accessKeyId": "AKIDTEST",
                "secretAccessKey": "secret/KEY+test", "sessionToken": "ROLE-TOKEN",
                "expiration": 32503680000000u64}})
            .to_string(),
        ),
    );
}

#[test]
fn sso_sign_in_is_exchanged_for_role_credentials() {
    let server = FakeServer::with_script(vec![Reply::text("via sso")]);
    role_credentials_route(&server);
    server.expect_bedrock_auth(sigv4("us-east-2", Some("ROLE-TOKEN")));
    let env = TestEnv::new();
    sso_setup(&env, None);
    sso_token(&env, "2999-01-01T00:00:00Z");
    let vars = sso_vars(&server);
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("via sso"));
    let get = &server.requests()[0];
    assert_eq!(
        get.path,
        "/federation/credentials?account_id=111122223333&role_name=Dev"
    );
    assert_eq!(get.header("x-amz-sso_bearer_token"), Some("SSO-ACCESS"));
}

#[test]
fn an_expired_sso_sign_in_runs_aws_auth_refresh_once_then_carries_on() {
    let server = FakeServer::with_script(vec![Reply::text("signed in again")]);
    role_credentials_route(&server);
    server.expect_bedrock_auth(sigv4("us-east-2", Some("ROLE-TOKEN")));
    let env = TestEnv::new();
    // Without a refresh command: one clear line, exit 1.
    sso_setup(&env, None);
    sso_token(&env, "2020-01-01T00:00:00Z");
    let vars = sso_vars(&server);
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_code(1);
    assert!(
        out.stderr.contains(
            "the SSO sign-in of AWS profile 'corp' has expired: run `aws sso login --profile corp`"
        ),
        "{}",
        out.stderr
    );
    // The refresh command (what `aws sso login` would do) writes a fresh token.
    let fresh = json!({"accessToken": "SSO-ACCESS", "expiresAt": "2999-01-01T00:00:00Z"});
    let cmd = format!(
        "echo 'open https://device.sso.us-east-1.amazonaws.com/?user_code=ABCD to sign in'; printf '%s' '{fresh}' > \"$HOME/.aws/sso/cache/{SSO_CACHE}\""
    );
    sso_setup(&env, Some(&cmd));
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("signed in again"));
    assert!(
        out.stderr.contains(
            "to sign in to AWS, open https://device.sso.us-east-1.amazonaws.com/?user_code=ABCD"
        ),
        "{}",
        out.stderr
    );
    // A refresh that does not help is run once, and said.
    sso_token(&env, "2020-01-01T00:00:00Z");
    sso_setup(&env, Some("echo trying; exit 3"));
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("aws_auth_refresh (echo trying; exit 3) failed (exit 3): trying"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_bedrock_api_key_is_a_bearer_token() {
    let server = FakeServer::with_script(vec![Reply::text("keyed")]);
    server.expect_bedrock_auth(Auth::Bearer("ABSKtestkey".into()));
    let env = TestEnv::new();
    let vars = vec![
        (
            "AWS_BEARER_TOKEN_BEDROCK".to_string(),
            "ABSKtestkey".to_string(),
        ),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".to_string(), server.url()),
        // Keys too: the API key wins, as in Go Crush.
        ("AWS_ACCESS_KEY_ID".to_string(), "AKIDTEST".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "x".to_string()),
    ];
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    assert_eq!(server.last_request().header("x-amz-date"), None);
}

#[test]
fn aws_credentials_go_only_to_aws_endpoints() {
    // The user's own Bedrock provider pointed at another server gets no AWS credential...
    let server = FakeServer::with_script(vec![Reply::text("plain")]);
    server.expect_bedrock_auth(Auth::None);
    let env = TestEnv::new();
    let provider = |key: Option<&str>| {
        let mut p = json!({"type": "bedrock", "base_url": server.url(),
            "models": [{"id": "anthropic.claude-x"}]});
        if let Some(k) = key {
            p["api_key"] = json!(k);
        }
        json!({"providers": {"proxy": p}})
    };
    env.write_config(&provider(None));
    let vars = vec![
        ("AWS_ACCESS_KEY_ID".to_string(), "AKIDTEST".to_string()),
        (
            "AWS_SECRET_ACCESS_KEY".to_string(),
            "secret/KEY+test".to_string(),
        ),
        (
            "AWS_BEARER_TOKEN_BEDROCK".to_string(),
            "ABSKsecret".to_string(),
        ),
        ("AWS_REGION".to_string(), "eu-west-3".to_string()),
    ];
    let out = run(
        &env,
        &["run", "-m", "proxy/anthropic.claude-x", "hi"],
        &vars,
    );
    out.assert_success();
    // A bare model id gets the inference profile of the region's geography.
    assert_eq!(
        server.last_request().path,
        "/model/eu.anthropic.claude-x/invoke-with-response-stream"
    );
    server.assert_clean();
    // ...only the key its own definition names.
    server.push(Reply::text("own key"));
    server.expect_bedrock_auth(Auth::Bearer("ABSKsecret".into()));
    env.write_config(&provider(Some("$AWS_BEARER_TOKEN_BEDROCK")));
    let out = run(
        &env,
        &["run", "-m", "proxy/anthropic.claude-x", "hi"],
        &vars,
    );
    out.assert_success();
}

#[test]
fn throttling_cut_frames_and_bad_checksums_are_retried() {
    let server = FakeServer::with_script(vec![
        Reply::error_mid_stream(
            "par",
            "throttlingException",
            "Too many requests, please wait.",
        ),
        Reply::api_error(429, "ThrottlingException", "Rate exceeded"),
        Reply::cut_mid_stream("half"),
        Reply::malformed_sse(),
    ]);
    server.push(Reply::text("steady"));
    server.expect_bedrock_auth(sigv4("us-east-1", None));
    let env = TestEnv::new();
    let mut vars = env_keys(&server);
    vars.push(("CRUSH_RETRY_BASE_MS".into(), "1".into()));
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    // Four failures: the default policy makes four attempts, so the last failure is reported.
    out.assert_code(1);
    let e = &out.stderr;
    assert!(
        e.contains("Amazon Bedrock throttlingException: Too many requests"),
        "{e}"
    );
    assert!(e.contains("ThrottlingException: Rate exceeded"), "{e}");
    assert!(
        e.contains("ended before the end of an event-stream frame"),
        "{e}"
    );
    assert!(e.contains("failed its message checksum"), "{e}");
    // The session stays loadable, and the next run gets the answer.
    let out = run(&env, &["run", "-C", "-m", HAIKU, "again"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("steady"));
}

#[test]
fn refused_credentials_and_unknown_models_are_said_clearly() {
    let server = FakeServer::with_script(vec![
        Reply::api_error(
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ),
        Reply::api_error(
            400,
            "ValidationException",
            "The provided model identifier is invalid.",
        ),
    ]);
    let env = TestEnv::new();
    let vars = env_keys(&server);
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_code(1);
    assert!(
        out.stderr.contains(
            "HTTP 403: Amazon Bedrock refused the credentials from the environment (AWS_ACCESS_KEY_ID) (UnrecognizedClientException: The security token included in the request is invalid.)"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(
        server.model_requests().len(),
        1,
        "refused credentials are not retried"
    );
    let out = run(
        &env,
        &["run", "-m", "bedrock/us.anthropic.claude-nope", "hi"],
        &vars,
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("Amazon Bedrock has no model 'us.anthropic.claude-nope' in region us-east-1"),
        "{}",
        out.stderr
    );
    // The catalog's close ids are named.
    assert!(
        out.stderr
            .contains("(close matches: us.anthropic.claude-opus-5, us.anthropic.claude-fable-5"),
        "{}",
        out.stderr
    );
}

#[test]
fn without_credentials_a_configured_bedrock_provider_says_what_to_set() {
    let env = TestEnv::new();
    env.write_config(&json!({"providers": {"bedrock": {}}}));
    let models = env.run(&["models", "--all", "bedrock-europe", "--json"], None);
    models.assert_success();
    assert!(
        models.stdout.contains(
            "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE"
        ),
        "{}",
        models.stdout
    );
    let out = env.run(&["run", "-m", HAIKU, "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        "{}",
        out.stderr
    );
    // An AWS_PROFILE that names nothing is named.
    let server = FakeServer::start();
    let vars = vec![
        ("AWS_PROFILE".to_string(), "ghost".to_string()),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".to_string(), server.url()),
    ];
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("AWS profile 'ghost' (AWS_PROFILE) is in neither"),
        "{}",
        out.stderr
    );
}

#[test]
fn refused_credentials_run_aws_auth_refresh_and_the_call_is_signed_anew() {
    let server = FakeServer::with_script(vec![
        Reply::api_error(
            403,
            "ExpiredTokenException",
            "The security token included in the request is expired",
        ),
        Reply::text("fresh keys"),
    ]);
    let env = TestEnv::new();
    let aws = env.home().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    let creds = |id: &str| format!("[dev]\naws_access_key_id = {id}\naws_secret_access_key = s\n");
    std::fs::write(aws.join("credentials"), creds("AKIDOLD")).unwrap();
    std::fs::write(env.home().join("new"), creds("AKIDNEW")).unwrap();
    env.write_config(&json!({"providers": {"bedrock": {
        "aws_auth_refresh": "cp \"$HOME/new\" \"$HOME/.aws/credentials\""}}}));
    let vars = vec![
        ("AWS_PROFILE".to_string(), "dev".to_string()),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".to_string(), server.url()),
    ];
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("fresh keys"));
    assert!(
        out.stderr
            .contains("refused the credentials from profile 'dev'")
            && out.stderr.contains("running aws_auth_refresh"),
        "{}",
        out.stderr
    );
    let auth: Vec<String> = server
        .model_requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or("").to_string())
        .collect();
    assert!(auth[0].contains("Credential=AKIDOLD/"), "{auth:?}");
    assert!(auth[1].contains("Credential=AKIDNEW/"), "{auth:?}");
}

#[test]
fn an_expiring_sso_sign_in_is_renewed_with_its_refresh_token() {
    let server = FakeServer::with_script(vec![Reply::text("renewed")]);
    server.route(
        "POST",
        "/token",
        Reply::raw(
            200,
            vec![("content-type", "application/json")],
            json!({"accessToken": "SSO-RENEWED", "expiresIn": 3600, "tokenType": "Bearer",
                "refreshToken": "REFRESH-2"})
            .to_string(),
        ),
    );
    role_credentials_route(&server);
    server.expect_bedrock_auth(sigv4("us-east-2", Some("ROLE-TOKEN")));
    let env = TestEnv::new();
    sso_setup(&env, None);
    let cache = env.home().join(".aws/sso/cache").join(SSO_CACHE);
    std::fs::write(
        &cache,
        json!({"startUrl": "https://corp.awsapps.com/start", "region": "us-east-1",
            "accessToken": "SSO-OLD", "expiresAt": "2020-01-01T00:00:00Z",
            "clientId": "CID", "clientSecret": "CSECRET", "refreshToken": "REFRESH-1",
            "registrationExpiresAt": "2999-01-01T00:00:00Z"})
        .to_string(),
    )
    .unwrap();
    let vars = sso_vars(&server);
    let out = run(&env, &["run", "-m", HAIKU, "hi"], &vars);
    out.assert_success();
    assert!(out.stdout.contains("renewed"));
    let reqs = server.requests();
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(
        reqs[0].body,
        json!({"clientId": "CID", "clientSecret": "CSECRET", "grantType": "refresh_token",
            "refreshToken": "REFRESH-1"})
    );
    assert_eq!(
        reqs[1].header("x-amz-sso_bearer_token"),
        Some("SSO-RENEWED")
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(saved["accessToken"], "SSO-RENEWED");
    assert_eq!(saved["refreshToken"], "REFRESH-2");
    assert_eq!(saved["clientId"], "CID");
}
