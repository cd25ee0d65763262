//! The S3 test server is real: objects stored and read back (whole and by range), listed by
//! prefix, deleted, uploaded in parts; unsigned and wrongly signed requests refused; its data
//! kept across a restart. Requests are made by curl, signed with AWS Signature Version 4
//! (`--aws-sigv4`), an S3 client independent of Rewind and object_store.

use rewind_testutil::s3::S3Server;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One curl request to the server: (HTTP status, response body). Status 0: no connection.
struct Req<'a> {
    s3: &'a S3Server,
    method: &'a str,
    /// Path and query after the bucket, e.g. `a/b.txt` or `?list-type=2&prefix=a%2F`.
    target: String,
    headers: Vec<String>,
    body: Option<Vec<u8>>,
    /// None: unsigned; Some(secret): signed with the server's key id and this secret.
    secret: Option<String>,
}

impl<'a> Req<'a> {
    fn new(s3: &'a S3Server, method: &'a str, target: &str) -> Self {
        Req {
            s3,
            method,
            target: target.to_string(),
            headers: Vec::new(),
            body: None,
            secret: Some(s3.secret_access_key().to_string()),
        }
    }

    fn header(mut self, h: &str) -> Self {
        self.headers.push(h.to_string());
        self
    }

    fn body(mut self, b: &[u8]) -> Self {
        self.body = Some(b.to_vec());
        self
    }

    fn secret(mut self, s: Option<&str>) -> Self {
        self.secret = s.map(str::to_string);
        self
    }

    fn send(self) -> (u16, Vec<u8>) {
        let (status, body, _) = self.send_with_headers();
        (status, body)
    }

    /// [`Req::send`] and the response's headers (as sent, one per line).
    fn send_with_headers(self) -> (u16, Vec<u8>, String) {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let headers = tmp.path().join("headers");
        let url = if self.target.starts_with('?') {
            format!("{}/{}{}", self.s3.endpoint(), self.s3.bucket(), self.target)
        } else {
            format!(
                "{}/{}/{}",
                self.s3.endpoint(),
                self.s3.bucket(),
                self.target
            )
        };
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "30", "-o"])
            .arg(&out)
            .arg("-D")
            .arg(&headers)
            .args(["-w", "%{http_code}"]);
        if self.method == "HEAD" {
            cmd.arg("--head"); // -X HEAD would wait for a body
        } else {
            cmd.args(["-X", self.method]);
        }
        if let Some(secret) = &self.secret {
            cmd.arg("--aws-sigv4")
                .arg(format!("aws:amz:{}:s3", self.s3.region()))
                .arg("--user")
                .arg(format!("{}:{secret}", self.s3.access_key_id()));
        }
        for h in &self.headers {
            cmd.arg("-H").arg(h);
        }
        if let Some(body) = &self.body {
            let f = tmp.path().join("body");
            std::fs::write(&f, body).unwrap();
            // The payload's hash is part of what S3 signs (curl does not send it itself).
            cmd.arg("-H")
                .arg(format!("x-amz-content-sha256: {}", sha256_hex(&f)));
            cmd.arg("--data-binary").arg(format!("@{}", f.display()));
            cmd.args(["-H", "Content-Type: application/octet-stream"]);
        } else {
            cmd.args(["-H", &format!("x-amz-content-sha256: {EMPTY_SHA256}")]);
        }
        cmd.arg(&url);
        let o = cmd.output().expect("curl (scripts/test installs it)");
        let status: u16 = String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        let body = std::fs::read(&out).unwrap_or_default();
        let headers = std::fs::read_to_string(&headers).unwrap_or_default();
        (status, body, headers)
    }
}

const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn sha256_hex(f: &Path) -> String {
    let o = Command::new("sha256sum").arg(f).output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()[..64].to_string()
}

fn put(s3: &S3Server, key: &str, body: &[u8]) -> (u16, Vec<u8>) {
    Req::new(s3, "PUT", key).body(body).send()
}

fn get(s3: &S3Server, key: &str) -> (u16, Vec<u8>) {
    Req::new(s3, "GET", key).send()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `<Key>` elements of a ListObjectsV2 answer.
fn keys(xml: &[u8]) -> Vec<String> {
    text(xml)
        .split("<Key>")
        .skip(1)
        .map(|s| s.split("</Key>").next().unwrap().to_string())
        .collect()
}

#[test]
fn s3_server_stores_lists_deletes_and_checks_signatures() {
    let mut s3 = S3Server::start();

    // PUT, GET, HEAD, GET with a Range.
    assert_eq!(put(&s3, "p/one.txt", b"hello, object store").0, 200);
    assert_eq!(put(&s3, "p/two.txt", b"second").0, 200);
    assert_eq!(put(&s3, "q/three.txt", b"elsewhere").0, 200);
    assert_eq!(
        get(&s3, "p/one.txt"),
        (200, b"hello, object store".to_vec())
    );
    assert_eq!(Req::new(&s3, "HEAD", "p/one.txt").send().0, 200);
    assert_eq!(Req::new(&s3, "HEAD", "p/none.txt").send().0, 404);
    let ranged = Req::new(&s3, "GET", "p/one.txt")
        .header("Range: bytes=7-12")
        .send();
    assert_eq!(ranged, (206, b"object".to_vec()), "{}", text(&ranged.1));

    // ListObjectsV2 with a prefix (and with a delimiter: one common prefix per "directory").
    let (st, xml) = Req::new(&s3, "GET", "?list-type=2&prefix=p%2F").send();
    assert_eq!(st, 200, "{}", text(&xml));
    assert_eq!(keys(&xml), ["p/one.txt", "p/two.txt"], "{}", text(&xml));
    let (st, xml) = Req::new(&s3, "GET", "?delimiter=%2F&list-type=2").send();
    assert_eq!(st, 200, "{}", text(&xml));
    assert!(keys(&xml).is_empty(), "{}", text(&xml));
    assert!(
        text(&xml).contains("<Prefix>p/</Prefix>") && text(&xml).contains("<Prefix>q/</Prefix>"),
        "{}",
        text(&xml)
    );

    // Authentication is real: unsigned and wrongly signed requests are refused, for reads and
    // writes alike, and a refused write stores nothing.
    assert_eq!(Req::new(&s3, "GET", "p/one.txt").secret(None).send().0, 403);
    let wrong = "0".repeat(s3.secret_access_key().len());
    assert_eq!(
        Req::new(&s3, "GET", "p/one.txt")
            .secret(Some(&wrong))
            .send()
            .0,
        403
    );
    assert_eq!(
        Req::new(&s3, "PUT", "p/forged.txt")
            .body(b"x")
            .secret(Some(&wrong))
            .send()
            .0,
        403
    );
    assert_eq!(
        Req::new(&s3, "PUT", "p/anon.txt")
            .body(b"x")
            .secret(None)
            .send()
            .0,
        403
    );
    assert_eq!(get(&s3, "p/forged.txt").0, 404);
    assert_eq!(get(&s3, "p/anon.txt").0, 404);
    // A body other than the one signed for is refused too.
    let tampered = Req::new(&s3, "PUT", "p/tampered.txt")
        .header(&format!("x-amz-content-sha256: {}", "ab".repeat(32)))
        .body(b"not what was signed")
        .send();
    assert!(tampered.0 >= 400, "{tampered:?}");
    assert_eq!(get(&s3, "p/tampered.txt").0, 404);

    // Conditional create (If-None-Match: *), what object_store's PutMode::Create sends.
    let new_key = Req::new(&s3, "PUT", "p/created.txt")
        .header("If-None-Match: *")
        .body(b"first")
        .send();
    assert_eq!(new_key.0, 200, "{}", text(&new_key.1));
    let again = Req::new(&s3, "PUT", "p/created.txt")
        .header("If-None-Match: *")
        .body(b"second")
        .send();
    if s3.conditional_create() {
        assert_eq!(again.0, 412, "{}", text(&again.1));
        assert_eq!(get(&s3, "p/created.txt").1, b"first");
    } else {
        eprintln!(
            "{}: If-None-Match: * on an existing key answered {} (not honoured)",
            s3.kind().name(),
            again.0
        );
        assert_eq!(again.0, 200, "{}", text(&again.1));
    }

    // Multipart upload: create, two parts (all but the last at least 5 MiB), complete.
    let (st, xml) = Req::new(&s3, "POST", "p/big.bin?uploads=").send();
    assert_eq!(st, 200, "{}", text(&xml));
    let upload_id = text(&xml)
        .split("<UploadId>")
        .nth(1)
        .and_then(|s| s.split("</UploadId>").next())
        .expect("an UploadId")
        .to_string();
    let part1 = vec![b'a'; 5 << 20];
    let part2 = b"the end".to_vec();
    let mut etags = Vec::new();
    for (n, part) in [(1, &part1), (2, &part2)] {
        let target = format!("p/big.bin?partNumber={n}&uploadId={upload_id}");
        let (st, body, headers) = Req::new(&s3, "PUT", &target).body(part).send_with_headers();
        assert_eq!(st, 200, "part {n}: {}", text(&body));
        let etag = headers
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case("etag"))
            })
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| panic!("no ETag for part {n}: {headers}"));
        etags.push(etag);
    }
    let complete = format!(
        "<CompleteMultipartUpload>{}</CompleteMultipartUpload>",
        etags
            .iter()
            .enumerate()
            .map(|(i, e)| format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{e}</ETag></Part>",
                i + 1
            ))
            .collect::<String>()
    );
    let (st, body) = Req::new(&s3, "POST", &format!("p/big.bin?uploadId={upload_id}"))
        .body(complete.as_bytes())
        .send();
    assert_eq!(st, 200, "{}", text(&body));
    let (st, big) = get(&s3, "p/big.bin");
    assert_eq!(st, 200);
    assert_eq!(big.len(), part1.len() + part2.len());
    assert!(big.starts_with(&part1) && big.ends_with(&part2));

    // DELETE.
    assert_eq!(Req::new(&s3, "DELETE", "p/two.txt").send().0, 204);
    assert_eq!(get(&s3, "p/two.txt").0, 404);

    // A restart keeps the data, on the same port, with the same key.
    // (Garage compresses blocks: 5 MiB of one byte take little room there.)
    let before = s3.stored_bytes();
    assert!(before > 0, "stored_bytes {before}");
    s3.restart();
    assert_eq!(
        get(&s3, "p/one.txt"),
        (200, b"hello, object store".to_vec())
    );
    assert_eq!(get(&s3, "p/big.bin").1.len(), part1.len() + part2.len());
    assert_eq!(s3.stored_bytes(), before);

    // Stopped, nothing answers; resumed, the data is there again.
    s3.stop();
    assert!(!s3.is_running());
    assert_eq!(get(&s3, "p/one.txt").0, 0);
    s3.resume();
    assert_eq!(get(&s3, "q/three.txt"), (200, b"elsewhere".to_vec()));
}

#[test]
fn dropping_the_server_kills_it_and_removes_its_data() {
    let s3 = S3Server::start();
    let data: PathBuf = s3.data_dir();
    let port = s3.port();
    assert!(data.is_dir());
    drop(s3);
    assert!(!data.exists());
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn env_names_what_object_store_reads() {
    let s3 = S3Server::start();
    let env: std::collections::BTreeMap<_, _> = s3.env().into_iter().collect();
    assert_eq!(env["AWS_ENDPOINT_URL"], s3.endpoint());
    assert_eq!(env["AWS_ENDPOINT"], s3.endpoint());
    assert_eq!(env["AWS_ALLOW_HTTP"], "true");
    assert_eq!(env["AWS_ACCESS_KEY_ID"], s3.access_key_id());
    assert_eq!(env["AWS_SECRET_ACCESS_KEY"], s3.secret_access_key());
    assert_eq!(env["AWS_REGION"], s3.region());
    assert_eq!(s3.url("ws/1"), format!("s3://{}/ws/1", s3.bucket()));
    // Two servers at once: their own ports, keys and data.
    let other = S3Server::start();
    assert_ne!(other.port(), s3.port());
    assert_ne!(other.access_key_id(), s3.access_key_id());
    assert!(!format!("{s3:?}").contains(s3.secret_access_key()));
}
