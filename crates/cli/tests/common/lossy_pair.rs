//! The scenario the `imp sim` tests share: two hosts on a lossy 20 Mbit/s link, one
//! bulk flow, so that different seeds give different figures and a run takes well
//! under a second.

/// The scenario named `name`, its flow sending `bytes` (a quantity such as `"256K"`),
/// with `extra` lines (e.g. `seed = 11`) after the name.
pub fn lossy_pair(name: &str, bytes: &str, extra: &str) -> String {
    format!(
        r#"
name = "{name}"
duration = "10s"
{extra}

[[host]]
name = "a"
[[host]]
name = "b"

[[link]]
name = "ab"
a = "a"
b = "b"
rate = "20mbit"
delay = "2ms"
loss = "0.5%"

[[flow]]
name = "bulk"
type = "bulk"
from = "a"
to = "b"
bytes = "{bytes}"
record = "4K"
"#
    )
}
