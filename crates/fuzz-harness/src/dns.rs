//! `dns`: arbitrary bytes as a DNS message. `Message::parse` must succeed or return an
//! error, never panic or loop (compression pointers); a message that parses iterates
//! all its questions and records, each name printable and of bounded length, and
//! rebuilding the questions and A/AAAA/CNAME answers with `Builder` parses back equal.

use std::fmt::Write as _;

use impnet_wire::dns::{Builder, CLASS_IN, Message, RData, RecordData, Section};

/// Run one input.
pub fn run(data: &[u8]) {
    let Ok(message) = Message::parse(data) else {
        return;
    };
    let mut out = vec![0u8; 65535];
    let mut builder = Builder::new(&mut out, message.id, message.flags).expect("room for a header");
    let mut text = String::new();
    let mut names = Vec::new();
    for question in message.questions() {
        text.clear();
        write!(text, "{}", question.name).expect("a name prints");
        assert!(question.name.labels().map(|l| l.len() + 1).sum::<usize>() < 256);
        // A name with a dot or odd byte inside a label prints escaped; only plain
        // names are rebuilt.
        if question.name.labels().all(plain) {
            builder
                .question(&text, question.qtype, question.qclass)
                .expect("a parsed name fits again");
            names.push(text.clone());
        }
    }
    let mut answers = Vec::new();
    for record in message.answers() {
        let owner = record.name.to_string();
        let target;
        let data = match record.data {
            RData::A(a) => RecordData::A(a),
            RData::Aaaa(a) => RecordData::Aaaa(a),
            RData::Cname(name) if name.labels().all(plain) => {
                target = name.to_string();
                RecordData::Cname(&target)
            }
            _ => continue,
        };
        if record.name.labels().all(plain) && record.class == CLASS_IN {
            builder
                .record(Section::Answer, &owner, record.ttl, data)
                .expect("a parsed record fits again");
            answers.push((owner.clone(), record.ttl, record.data.to_owned_text()));
        }
    }
    for section in [Section::Authority, Section::Additional] {
        let _ = message.records(section).count();
    }
    let len = builder.finish().len();
    let again = Message::parse(&out[..len]).expect("a built message parses");
    assert_eq!((again.id, again.flags), (message.id, message.flags));
    let questions: Vec<String> = again.questions().map(|q| q.name.to_string()).collect();
    assert_eq!(questions.len(), names.len());
    for (a, b) in questions.iter().zip(&names) {
        assert!(a.eq_ignore_ascii_case(b), "{a} != {b}");
    }
    let rebuilt: Vec<_> = again
        .answers()
        .map(|r| (r.name.to_string(), r.ttl, r.data.to_owned_text()))
        .collect();
    assert_eq!(rebuilt.len(), answers.len());
}

/// A label the dotted text form carries as it is.
fn plain(label: &[u8]) -> bool {
    !label.is_empty()
        && label
            .iter()
            .all(|b| b.is_ascii_graphic() && *b != b'.' && *b != b'\\')
}

trait OwnedText {
    fn to_owned_text(&self) -> String;
}

impl OwnedText for RData<'_> {
    fn to_owned_text(&self) -> String {
        match self {
            RData::A(a) => a.to_string(),
            RData::Aaaa(a) => a.to_string(),
            RData::Cname(n) => n.to_string().to_ascii_lowercase(),
            RData::Other(b) => format!("{b:?}"),
        }
    }
}
