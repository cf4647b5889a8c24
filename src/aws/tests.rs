//! The signer against AWS's published Signature Version 4 test suite (the vectors are those of
//! the suite: credentials AKIDEXAMPLE, 2015-08-30 12:36:00 UTC, region us-east-1, service
//! `service`, host example.amazonaws.com), and the event-stream decoder against frames with
//! known bytes and broken ones.

use super::sigv4::{self, Credentials, Request};

const DATE: &str = "20150830T123600Z";

fn suite_creds() -> Credentials {
    Credentials {
        access_key_id: "AKIDEXAMPLE".into(),
        secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        session_token: None,
    }
}

fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Signs a suite request and returns its authorization header.
fn suite_auth(method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> String {
    let url = format!("https://example.amazonaws.com{target}");
    let headers = h(headers);
    let out = sigv4::sign(
        &Request {
            method,
            url: &url,
            headers: &headers,
            body: body.as_bytes(),
        },
        &suite_creds(),
        "us-east-1",
        "service",
        DATE,
    );
    assert_eq!(out[0], ("x-amz-date".to_string(), DATE.to_string()));
    out.into_iter()
        .find(|(k, _)| k == "authorization")
        .unwrap()
        .1
}

fn expected(signed: &str, sig: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders={signed}, Signature={sig}"
    )
}

#[test]
fn get_vanilla_step_by_step() {
    let headers = h(&[("Host", "example.amazonaws.com"), ("X-Amz-Date", DATE)]);
    let (canonical, names) = sigv4::canonical_request("GET", "/", "", &headers, b"");
    assert_eq!(
        canonical,
        "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(names, "host;x-amz-date");
    let scope = sigv4::scope(DATE, "us-east-1", "service");
    assert_eq!(scope, "20150830/us-east-1/service/aws4_request");
    let sts = sigv4::string_to_sign(DATE, &scope, &canonical);
    assert_eq!(
        sts,
        "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
    );
    assert_eq!(
        sigv4::signature("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", &scope, &sts),
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    );
}

/// method, target, headers, body, signed headers, signature.
type Vector<'a> = (
    &'a str,
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a str,
    &'a str,
    &'a str,
);

#[test]
fn published_vectors() {
    let plain = "host;x-amz-date";
    let cases: &[Vector] = &[
        (
            "GET",
            "/",
            &[],
            "",
            plain,
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        ),
        (
            "GET",
            "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            &[],
            "",
            plain,
            "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
        ),
        (
            "GET",
            "/?Param2=value2&Param1=value1",
            &[],
            "",
            plain,
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        ),
        (
            "GET",
            "/?Param1=value2&Param1=value1",
            &[],
            "",
            plain,
            "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694",
        ),
        (
            "GET",
            "/?\u{1234}=bar",
            &[],
            "",
            plain,
            "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
        ),
        (
            "GET",
            "/",
            &[
                ("My-Header1", "value4"),
                ("My-Header1", "value1"),
                ("My-Header1", "value3"),
                ("My-Header1", "value2"),
            ],
            "",
            "host;my-header1;x-amz-date",
            "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
        ),
        (
            "GET",
            "/",
            &[
                ("My-Header1", "value2"),
                ("My-Header1", "value2"),
                ("My-Header1", "value1"),
            ],
            "",
            "host;my-header1;x-amz-date",
            "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
        ),
        (
            "GET",
            "/",
            &[("My-Header1", " value1"), ("My-Header2", "\"a   b   c\"")],
            "",
            "host;my-header1;my-header2;x-amz-date",
            "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
        ),
        (
            "POST",
            "/",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            "Param1=value1",
            "content-type;host;x-amz-date",
            "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
        ),
    ];
    for (method, target, headers, body, signed, sig) in cases {
        assert_eq!(
            suite_auth(method, target, headers, body),
            expected(signed, sig),
            "{method} {target}"
        );
    }
}

#[test]
fn paths_are_encoded_once_more_and_tokens_are_signed() {
    // A Bedrock model id: `:` is sent as %3A and signed as %253A.
    let (c, _) = sigv4::canonical_request(
        "POST",
        "/model/us.anthropic.claude-x-v1%3A0/invoke-with-response-stream",
        "",
        &[],
        b"",
    );
    assert_eq!(
        c.lines().nth(1),
        Some("/model/us.anthropic.claude-x-v1%253A0/invoke-with-response-stream")
    );
    let mut creds = suite_creds();
    creds.session_token = Some("TOKEN".into());
    let out = sigv4::sign(
        &Request {
            method: "GET",
            url: "http://127.0.0.1:8080/",
            headers: &[],
            body: b"",
        },
        &creds,
        "us-east-1",
        "service",
        DATE,
    );
    assert_eq!(out[1], ("x-amz-security-token".into(), "TOKEN".into()));
    let (akid, scope, names, _) = sigv4::parse_authorization(&out[2].1).unwrap();
    assert_eq!(akid, "AKIDEXAMPLE");
    assert_eq!(scope, "20150830/us-east-1/service/aws4_request");
    assert_eq!(names, ["host", "x-amz-date", "x-amz-security-token"]);
    assert_eq!(
        sigv4::split_url("https://h.example:443/p?q=1"),
        ("h.example".to_string(), "/p", "q=1")
    );
    assert_eq!(
        sigv4::split_url("http://127.0.0.1:8080"),
        ("127.0.0.1:8080".to_string(), "", "")
    );
}

#[test]
fn dates_and_aws_urls() {
    assert_eq!(super::amz_date(1_440_938_160), DATE);
    assert!(super::is_aws_url(
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke"
    ));
    assert!(super::is_aws_url(
        "https://vpce-1.bedrock-runtime.eu-west-1.vpce.amazonaws.com:443"
    ));
    assert!(!super::is_aws_url(
        "http://bedrock-runtime.us-east-1.amazonaws.com"
    ));
    assert!(!super::is_aws_url("https://amazonaws.com.evil.example/"));
    assert!(!super::is_aws_url("https://127.0.0.1:9/"));
}
