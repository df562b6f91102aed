use std::io::{Read, Write};

use super::*;
use crate::fs::MemFs;

const CLIENT: &str = "10.0.0.2";

fn session(upload: Option<&str>) -> (Session<MemFs>, MemFs) {
    let fs = MemFs::new();
    fs.insert("/pub/text.txt", b"one\ntwo\n".to_vec());
    fs.insert("/pub/bin", vec![0, 10, 13, 255]);
    fs.insert("/incoming/old", b"x".to_vec());
    let config = ServerConfig {
        anonymous: true,
        user: Some(("alice".into(), "secret".into())),
        upload_dir: upload.map(String::from),
    };
    (
        Session::new(config, fs.clone(), CLIENT.parse().unwrap()),
        fs,
    )
}

fn code(s: &mut Session<MemFs>, line: &str) -> u16 {
    match s.handle_line(line.as_bytes()) {
        Action::Reply(r) | Action::Close(r) => r.code,
        Action::Listen { .. } => 1,
        Action::Transfer(_) => 2,
    }
}

fn text(s: &mut Session<MemFs>, line: &str) -> String {
    match s.handle_line(line.as_bytes()) {
        Action::Reply(r) | Action::Close(r) => format!("{} {}", r.code, r.lines.join("|")),
        _ => panic!("{line}: not a reply"),
    }
}

fn logged_in(upload: Option<&str>) -> (Session<MemFs>, MemFs) {
    let (mut s, fs) = session(upload);
    assert_eq!(code(&mut s, "USER anonymous"), 331);
    assert_eq!(code(&mut s, "PASS me@example"), 230);
    (s, fs)
}

/// Sets up a passive data connection; returns the transfer of `line`.
fn transfer(s: &mut Session<MemFs>, line: &str) -> Transfer {
    assert!(matches!(
        s.handle_line(b"PASV"),
        Action::Listen { extended: false }
    ));
    let r = s.passive_ready("10.0.0.1:40000".parse().unwrap(), false);
    assert_eq!(
        r.to_string(),
        "227 Entering Passive Mode (10,0,0,1,156,64)\r\n"
    );
    match s.handle_line(line.as_bytes()) {
        Action::Transfer(t) => t,
        Action::Reply(r) => panic!("{line}: {r}"),
        _ => panic!("{line}: not a transfer"),
    }
}

fn read_all(t: Transfer) -> Vec<u8> {
    let Direction::Send(mut r) = t.direction else {
        panic!("not a send")
    };
    let mut out = Vec::new();
    r.read_to_end(&mut out).unwrap();
    out
}

#[test]
fn login_anonymous_user_and_wrong_password() {
    let (mut s, _) = session(None);
    assert_eq!(s.greeting().code, 220);
    assert_eq!(code(&mut s, "RETR x"), 530, "not logged in");
    assert_eq!(code(&mut s, "PASS x"), 503, "PASS before USER");
    assert_eq!(code(&mut s, "USER alice"), 331);
    assert_eq!(code(&mut s, "PASS wrong"), 530);
    assert_eq!(code(&mut s, "PWD"), 530);
    assert_eq!(code(&mut s, "USER alice"), 331);
    assert_eq!(code(&mut s, "PASS secret"), 230);
    assert_eq!(code(&mut s, "PASS secret"), 503, "already in");
    assert_eq!(text(&mut s, "PWD"), "257 \"/\" is the current directory");
    assert_eq!(code(&mut s, "QUIT"), 221);
    let (mut anon_off, _) = session(None);
    anon_off.config.anonymous = false;
    assert_eq!(code(&mut anon_off, "USER anonymous"), 331);
    assert_eq!(code(&mut anon_off, "PASS a@b"), 530);
}

#[test]
fn every_bad_command_gets_a_clear_code() {
    let (mut s, _) = logged_in(None);
    for (line, expect) in [
        ("XYZZY", 500),
        ("DELE pub/bin", 502),
        ("RETR", 501),
        ("TYPE E", 504),
        ("MODE B", 504),
        ("RETR pub/none", 550),
        ("RETR pub", 550),
        ("RETR ../../etc/passwd", 550),
        ("RETR pub/bin", 425),
        ("CWD pub/bin", 550),
        ("CWD /nowhere", 550),
        ("SIZE pub", 550),
        ("STOR incoming/x", 502),
        ("PORT 10,0,0,9,200,1", 501),
        ("PORT 10,0,0,2,0,80", 501),
        ("OPTS FOO", 501),
        ("REST 5", 504),
        ("ABOR", 226),
        ("NOOP", 200),
        ("SYST", 215),
    ] {
        assert_eq!(code(&mut s, line), expect, "{line}");
    }
    assert_eq!(code(&mut s, "EPSV ALL"), 200);
    assert_eq!(code(&mut s, "PASV"), 503);
    assert_eq!(code(&mut s, "PORT 10,0,0,2,200,1"), 503);
    assert_eq!(code(&mut s, "EPSV"), 1);
    let feat = s.handle_line(b"FEAT");
    let Action::Reply(feat) = feat else { panic!() };
    assert_eq!(feat.code, 211);
    assert!(feat.lines.iter().any(|l| l == "EPSV") && feat.lines.iter().any(|l| l == "SIZE"));
}

#[test]
fn retr_in_both_types_and_from_an_offset() {
    let (mut s, _) = logged_in(None);
    assert_eq!(code(&mut s, "CWD pub"), 250);
    assert_eq!(
        text(&mut s, "SIZE text.txt"),
        "213 10",
        "TYPE A counts the CRs"
    );
    let t = transfer(&mut s, "RETR text.txt");
    assert!(t.ascii && t.peer == DataPeer::Accept && t.start.code == 150);
    assert_eq!(read_all(t), b"one\ntwo\n", "the driver translates");
    assert_eq!(
        s.transfer_done(TransferOutcome::Done { bytes: 10 }).code,
        226
    );
    assert_eq!(
        code(&mut s, "RETR text.txt"),
        425,
        "PASV is good for one transfer"
    );
    assert_eq!(code(&mut s, "TYPE I"), 200);
    assert_eq!(text(&mut s, "SIZE /pub/text.txt"), "213 8");
    assert_eq!(text(&mut s, "MDTM bin"), "213 19700101000000");
    // REST comes right before the RETR it applies to.
    assert!(matches!(s.handle_line(b"PASV"), Action::Listen { .. }));
    s.passive_ready("10.0.0.1:40000".parse().unwrap(), false);
    assert_eq!(code(&mut s, "REST 2"), 350);
    let Action::Transfer(t) = s.handle_line(b"RETR bin") else {
        panic!()
    };
    assert!(!t.ascii);
    assert_eq!(read_all(t), [13, 255]);
    assert_eq!(code(&mut s, "PORT 10,0,0,2,200,1"), 200);
    let Action::Transfer(t) = s.handle_line(b"RETR bin") else {
        panic!()
    };
    assert_eq!(t.peer, DataPeer::Connect("10.0.0.2:51201".parse().unwrap()));
    assert_eq!(read_all(t), [0, 10, 13, 255], "REST was used up");
    assert_eq!(code(&mut s, "EPRT |1|10.0.0.2|6000|"), 200);
    assert!(matches!(s.handle_line(b"RETR bin"), Action::Transfer(_)));
    assert_eq!(s.transfer_done(TransferOutcome::Aborted).code, 426);
    assert_eq!(s.abort_done().code, 226);
    assert_eq!(
        s.transfer_done(TransferOutcome::NoConnection("x".into()))
            .code,
        425
    );
    assert_eq!(
        s.transfer_done(TransferOutcome::LocalError("x".into()))
            .code,
        451
    );
}

#[test]
fn listings_and_the_working_directory() {
    let (mut s, _) = logged_in(None);
    let names = read_all(transfer(&mut s, "NLST"));
    assert_eq!(names, b"incoming\r\npub\r\n");
    let long = String::from_utf8(read_all(transfer(&mut s, "LIST -la pub"))).unwrap();
    let lines: Vec<&str> = long.lines().collect();
    assert_eq!(lines.len(), 2, "{long}");
    assert!(lines[0].starts_with("-rw-r--r-- 1 ftp ftp ") && lines[0].ends_with(" bin"));
    assert!(
        long.contains("            8 Jan  1  1970 text.txt\r\n"),
        "{long}"
    );
    assert_eq!(code(&mut s, "CWD pub"), 250);
    assert_eq!(code(&mut s, "CDUP"), 250);
    assert_eq!(code(&mut s, "CDUP"), 550, "no way above the root");
    assert!(matches!(
        s.handle_line(b"EPSV"),
        Action::Listen { extended: true }
    ));
    let r = s.passive_ready("10.0.0.1:40001".parse().unwrap(), true);
    assert_eq!(r.text(), "Entering Extended Passive Mode (|||40001|)");
    assert!(matches!(
        s.handle_line(b"LIST pub/bin"),
        Action::Transfer(_)
    ));
}

#[test]
fn stor_only_into_the_upload_directory() {
    let (mut s, fs) = logged_in(Some("/incoming"));
    assert_eq!(
        code(&mut s, "STOR incoming/x"),
        425,
        "no data connection yet"
    );
    assert_eq!(fs.get("/incoming/x"), None, "nothing created without one");
    assert!(matches!(s.handle_line(b"PASV"), Action::Listen { .. }));
    s.passive_ready("10.0.0.1:40000".parse().unwrap(), false);
    assert_eq!(code(&mut s, "STOR pub/x"), 553);
    assert_eq!(code(&mut s, "STOR /incoming"), 553);
    let t = transfer(&mut s, "STOR incoming/new.txt");
    let Direction::Receive(mut w) = t.direction else {
        panic!()
    };
    w.write_all(b"data").unwrap();
    drop(w);
    assert_eq!(fs.get("/incoming/new.txt").unwrap(), b"data");
}

#[test]
fn lines_are_cut_and_telnet_commands_dropped() {
    let mut lines = LineBuffer::new();
    let got = lines.push(b"NOOP\r\nUS");
    assert_eq!(got, vec![Ok(b"NOOP".to_vec())]);
    let got = lines.push(b"ER a\n\xff\xf4\xff\xf2ABOR\r\n");
    assert_eq!(got, vec![Ok(b"USER a".to_vec()), Ok(b"ABOR".to_vec())]);
    let long = vec![b'a'; MAX_LINE + 10];
    let got = lines.push(&long);
    assert!(got.is_empty());
    let got = lines.push(b"\r\nNOOP\n");
    assert_eq!(got[0].as_ref().unwrap_err().code, 500);
    assert_eq!(got[1], Ok(b"NOOP".to_vec()));
}

mod arbitrary {
    use super::*;
    use crate::reply::ReplyParser;
    use proptest::prelude::*;

    fn line() -> impl Strategy<Value = Vec<u8>> {
        let verbs = prop_oneof![
            Just(b"USER anonymous".to_vec()),
            Just(b"PASS x".to_vec()),
            Just(b"CWD ..".to_vec()),
            Just(b"PASV".to_vec()),
            Just(b"EPRT |1|10.0.0.2|2000|".to_vec()),
            Just(b"RETR pub/text.txt".to_vec()),
            Just(b"REST 3".to_vec()),
            Just(b"TYPE I".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ];
        verbs
    }

    proptest! {
        /// Any bytes as commands, in any order: a reply or an action every time, never
        /// a panic, and every reply code one RFC 959 defines.
        #[test]
        fn any_lines_get_replies(lines in proptest::collection::vec(line(), 0..30)) {
            let (mut s, _) = session(Some("/incoming"));
            for line in lines {
                match s.handle_line(&line) {
                    Action::Reply(r) | Action::Close(r) => {
                        prop_assert!((100..600).contains(&r.code));
                        prop_assert!(r.to_string().ends_with("\r\n"));
                    }
                    Action::Listen { extended } => {
                        let r = s.passive_ready("10.0.0.1:40000".parse().unwrap(), extended);
                        prop_assert!(r.code == 227 || r.code == 229);
                    }
                    Action::Transfer(t) => {
                        prop_assert_eq!(t.start.code, 150);
                        s.transfer_done(TransferOutcome::Done { bytes: 0 });
                    }
                }
            }
        }

        /// Any bytes from a server: replies or an error, never a panic.
        #[test]
        fn any_bytes_parse_or_fail_as_replies(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = ReplyParser::new().push(&data);
            let _ = LineBuffer::new().push(&data);
        }
    }
}
