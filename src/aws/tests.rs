//! The signer against AWS's published Signature Version 4 test suite (the vectors are those of
//! the suite: credentials AKIDEXAMPLE, 2015-08-30 12:36:00 UTC, region us-east-1, service
//! `service`, host example.amazonaws.com), and the event-stream decoder against frames with
//! known bytes and broken ones.

use super::eventstream::{self, Decoder, FrameError, HeaderValue};
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

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A Bedrock `chunk` event as the service frames it, its checksums computed with zlib.
const CHUNK: &str = "000000e20000004bd638d3ce0b3a6576656e742d747970650700056368756e6b0d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b226279746573223a2265794a306558426c496a6f695932397564475675644639696247396a6131396b5a57783059534973496d6c755a475634496a6f774c434a6b5a5778305953493665794a306558426c496a6f69644756346446396b5a57783059534973496e526c654851694f694a4961534a3966513d3d222c2270223a2261626364227d528ecb0b";

fn decode_all(bytes: &[u8]) -> Result<Vec<eventstream::Message>, FrameError> {
    let mut d = Decoder::new(bytes, 1 << 20);
    let mut out = Vec::new();
    while let Some(m) = d.next_message()? {
        out.push(m);
    }
    Ok(out)
}

#[test]
fn base64_for_chunks() {
    assert_eq!(eventstream::base64(b"Hi"), "SGk=");
    assert_eq!(eventstream::base64(b"abc"), "YWJj");
    assert_eq!(eventstream::base64(b"a"), "YQ==");
}

#[test]
fn crc32_is_ieee() {
    assert_eq!(eventstream::crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(eventstream::crc32(b""), 0);
}

#[test]
fn known_frames_decode() {
    // The empty message: 16 bytes, no headers, no payload.
    let empty = decode_all(&unhex("000000100000000005c248eb7d98c8ff")).unwrap();
    assert_eq!(empty.len(), 1);
    assert!(empty[0].headers.is_empty() && empty[0].payload.is_empty());
    let mut two = unhex(CHUNK);
    two.extend(unhex(CHUNK));
    let msgs = decode_all(&two).unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0].header(":event-type"), Some("chunk"));
    assert_eq!(msgs[0].header(":message-type"), Some("event"));
    assert_eq!(msgs[0].header(":content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&msgs[1].payload).unwrap();
    let inner = crate::llm::base64_decode(v["bytes"].as_str().unwrap()).unwrap();
    assert_eq!(
        String::from_utf8(inner).unwrap(),
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#
    );
    // The encoder writes the same bytes.
    assert_eq!(
        eventstream::encode(
            &[
                (":event-type", "chunk"),
                (":content-type", "application/json"),
                (":message-type", "event")
            ],
            &msgs[0].payload
        ),
        unhex(CHUNK)
    );
}

#[test]
fn every_header_type_decodes() {
    let mut hb = Vec::new();
    let mut put = |name: &str, ty: u8, value: &[u8]| {
        hb.push(name.len() as u8);
        hb.extend_from_slice(name.as_bytes());
        hb.push(ty);
        hb.extend_from_slice(value);
    };
    put("t", 0, &[]);
    put("f", 1, &[]);
    put("b", 2, &[0xff]);
    put("s", 3, &[0x01, 0x02]);
    put("i", 4, &[0xff, 0xff, 0xff, 0xfe]);
    put("l", 5, &[0, 0, 0, 0, 0, 0, 1, 0]);
    put("y", 6, &[0, 2, 0xde, 0xad]);
    put("ts", 8, &[0, 0, 1, 0x8f, 0, 0, 0, 0]);
    put("u", 9, &[7; 16]);
    let total = (16 + hb.len()) as u32;
    let mut msg = total.to_be_bytes().to_vec();
    msg.extend((hb.len() as u32).to_be_bytes());
    msg.extend(eventstream::crc32(&msg).to_be_bytes());
    msg.extend(&hb);
    msg.extend(eventstream::crc32(&msg).to_be_bytes());
    let m = &decode_all(&msg).unwrap()[0];
    let values: Vec<&HeaderValue> = m.headers.iter().map(|(_, v)| v).collect();
    assert_eq!(
        values,
        [
            &HeaderValue::Bool(true),
            &HeaderValue::Bool(false),
            &HeaderValue::Byte(-1),
            &HeaderValue::Short(0x0102),
            &HeaderValue::Int(-2),
            &HeaderValue::Long(256),
            &HeaderValue::Bytes(vec![0xde, 0xad]),
            &HeaderValue::Timestamp(0x18f_0000_0000),
            &HeaderValue::Uuid([7; 16]),
        ]
    );
}

#[test]
fn broken_frames_are_refused() {
    let good = unhex(CHUNK);
    for cut in [1, 11, 12, 40, good.len() - 1] {
        assert!(
            matches!(decode_all(&good[..cut]), Err(FrameError::Truncated)),
            "cut at {cut}"
        );
    }
    let mut bad = good.clone();
    bad[3] ^= 1;
    assert!(matches!(
        decode_all(&bad),
        Err(FrameError::Crc { what: "prelude" })
    ));
    let mut bad = good.clone();
    bad[100] ^= 0x20;
    let e = decode_all(&bad).unwrap_err();
    assert!(matches!(e, FrameError::Crc { what: "message" }));
    assert!(e.to_string().contains("message checksum"), "{e}");
    let mut d = Decoder::new(&good[..], 100);
    assert!(matches!(
        d.next_message(),
        Err(FrameError::TooLarge {
            len: 226,
            limit: 100
        })
    ));
    // A headers length past the message.
    let mut msg = 16u32.to_be_bytes().to_vec();
    msg.extend(4u32.to_be_bytes());
    msg.extend(eventstream::crc32(&msg).to_be_bytes());
    msg.extend(eventstream::crc32(&msg).to_be_bytes());
    assert!(matches!(decode_all(&msg), Err(FrameError::Malformed(_))));
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
