//! What Python's `jsonschema` (4.26, with its format extras) accepts for each format it
//! checks, written down in Rust so the format-agreement probe ([`super::probe`]) can hold
//! the grammars to it without Python.
//!
//! Input: a format name and a string. Output: `Some(verdict)` for the formats this table
//! knows, `None` for the others. Each rule is read off the checker `jsonschema/_format.py`
//! registers for draft 2020-12 and the library it calls (named on each function). Where
//! that library takes more than the rule here (Unicode digits in `fqdn`'s `\d`, a `$` that
//! matches before a final newline, `uuid.UUID`'s `{…}` and `urn:uuid:` spellings, decimal
//! fractions in `isoduration`), the rule takes less: the table may refuse what Python
//! accepts, never accept what it refuses, so a grammar within the table is within Python.
//! When Python is installed, the probe checks that too.

/// Python's verdict on `s` as a `format` (see the module docs), or `None` when the table
/// has no rule for it: `regex` (Python's `re` syntax), `uri-reference`, `iri`,
/// `iri-reference`, `uri-template`, `idn-hostname` (formats with no grammar here, which the
/// compiler refuses or checks at run time) and formats Python does not check.
pub(super) fn accepts(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "date" => date(s),
        "date-time" => date_time(s),
        // `is_time`: a date-time on 1970-01-01.
        "time" => date_time(&format!("1970-01-01T{s}")),
        // `is_email`, also for `idn-email`: any string with an `@`.
        "email" | "idn-email" => s.contains('@'),
        "hostname" => hostname(s),
        "ipv4" => ipv4(s),
        "ipv6" => ipv6(s),
        "uri" => uri(s),
        "uuid" => uuid(s),
        "duration" => duration(s),
        "json-pointer" => json_pointer(s),
        _ => return None,
    })
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_leap(year: u32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days in `month` of `year` (`calendar.monthrange`), 0 for a month that is not one.
fn month_days(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// A day that `datetime.date` can hold: years 1 to 9999 (there is no year 0).
fn real_day(year: u32, month: u32, day: u32) -> bool {
    (1..=9999).contains(&year) && (1..=month_days(year, month)).contains(&day)
}

/// The number spelled by `s`, all ASCII digits (short enough not to overflow).
fn num(s: &str) -> Option<u32> {
    if all_digits(s) && s.len() <= 9 {
        s.parse().ok()
    } else {
        None
    }
}

/// `is_date`: `^\d{4}-\d{2}-\d{2}$` (ASCII digits, `fullmatch`) and `date.fromisoformat`.
fn date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    match (num(&s[0..4]), num(&s[5..7]), num(&s[8..10])) {
        (Some(y), Some(m), Some(d)) => real_day(y, m, d),
        _ => false,
    }
}

/// `is_datetime`: `rfc3339_validator.validate_rfc3339(s.upper())`, its regex (year, month
/// `01`–`12`, two-digit day, `T`, hours `00`–`23`, minutes and seconds `00`–`59`, any
/// fraction, `Z` or `±hh:mm` with hours `00`–`23`), then a year other than 0 and a day
/// within `calendar.monthrange`. The regex's `$` also matches before a final newline; this
/// rule does not take one.
fn date_time(s: &str) -> bool {
    if !s.is_ascii() {
        return false;
    }
    let u = s.to_ascii_uppercase();
    let b = u.as_bytes();
    // `YYYY-MM-DDThh:mm:ss`: 19 bytes, then the fraction and the offset.
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return false;
    }
    let (Some(y), Some(mo), Some(d)) = (num(&u[0..4]), num(&u[5..7]), num(&u[8..10])) else {
        return false;
    };
    // No year 0; `month_days` is 0 for a month that is not one.
    if y == 0 || !(1..=month_days(y, mo)).contains(&d) {
        return false;
    }
    let (Some(h), Some(mi), Some(se)) = (num(&u[11..13]), num(&u[14..16]), num(&u[17..19])) else {
        return false;
    };
    if h > 23 || mi > 59 || se > 59 {
        return false;
    }
    let mut rest = &u[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    if rest == "Z" {
        return true;
    }
    let o = rest.as_bytes();
    o.len() == 6
        && (o[0] == b'+' || o[0] == b'-')
        && o[3] == b':'
        && num(&rest[1..3]).is_some_and(|h| h <= 23)
        && num(&rest[4..6]).is_some_and(|m| m <= 59)
}

/// `is_host_name`: `fqdn.FQDN(s, min_labels=1).is_valid`. Not empty; at most 253
/// characters besides a final dot; labels of 1 to 63 letters, digits and hyphens, neither
/// first nor last a hyphen, joined by dots, with an optional final dot. (`fqdn` matches
/// case-insensitively with Unicode `\d`, so it also takes some non-ASCII characters; this
/// rule does not.)
fn hostname(s: &str) -> bool {
    let body = s.strip_suffix('.').unwrap_or(s);
    if body.is_empty() || body.len() > 253 {
        return false;
    }
    body.split('.').all(|l| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    })
}

/// `ipaddress.IPv4Address`: four dot-separated decimal octets of 1 to 3 ASCII digits, at most
/// 255, without leading zeros.
fn ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            all_digits(p) && p.len() <= 3 && (*p == "0" || !p.starts_with('0')) && num(p).is_some_and(|n| n <= 255)
        })
}

/// `ipaddress.IPv6Address` without a scope (`is_ipv6` refuses `%scope`), following
/// `_ip_int_from_string`: colon-separated parts, the last one possibly an IPv4 address
/// (two groups), at most one `::`, groups of 1 to 4 hex digits.
fn ipv6(s: &str) -> bool {
    if s.is_empty() || s.contains(['/', '%']) {
        return false;
    }
    let mut parts: Vec<&str> = s.split(':').collect();
    if parts.len() < 3 {
        return false;
    }
    if parts.last().is_some_and(|p| p.contains('.')) {
        if !parts.pop().is_some_and(ipv4) {
            return false;
        }
        // Two groups that always parse.
        parts.extend(["0", "0"]);
    }
    if parts.len() > 9 {
        return false;
    }
    let mut skip = None;
    for (i, p) in parts.iter().enumerate().take(parts.len() - 1).skip(1) {
        if p.is_empty() {
            if skip.is_some() {
                return false;
            }
            skip = Some(i);
        }
    }
    let n = parts.len();
    let (hi, lo) = match skip {
        Some(i) => {
            let (mut hi, mut lo) = (i, n - i - 1);
            if parts[0].is_empty() {
                hi -= 1;
                if hi > 0 {
                    return false;
                }
            }
            if parts[n - 1].is_empty() {
                lo -= 1;
                if lo > 0 {
                    return false;
                }
            }
            if hi + lo > 7 {
                return false;
            }
            (hi, lo)
        }
        None => {
            if n != 8 || parts[0].is_empty() || parts[n - 1].is_empty() {
                return false;
            }
            (n, 0)
        }
    };
    let hextet = |p: &&str| (1..=4).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_hexdigit());
    parts[..hi].iter().all(hextet) && parts[n - lo..].iter().all(hextet)
}

/// `rfc3987.parse(s, rule="URI")`: RFC 3986's `URI` rule, as the regular expression
/// `rfc3987` builds from its ABNF. (Its `dec-octet` also takes leading zeros and its `$`
/// a final newline; this rule does not.)
fn uri(s: &str) -> bool {
    use regex_automata::meta::Regex;
    use std::sync::OnceLock;
    static URI: OnceLock<Option<Regex>> = OnceLock::new();
    let re = URI.get_or_init(|| {
        let hex = "[0-9A-Fa-f]";
        let unreserved = "[A-Za-z0-9._~-]";
        let sub = "[!$&'()*+,;=]";
        let pct = format!("%{hex}{hex}");
        let pchar = format!("(?:{unreserved}|{pct}|{sub}|[:@])");
        let h16 = format!("{hex}{{1,4}}");
        let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
        let v4 = format!("(?:{octet}\\.{octet}\\.{octet}\\.{octet})");
        let ls32 = format!("(?:{h16}:{h16}|{v4})");
        // `n` groups, each followed by `:`.
        let g = |n: u32| format!("(?:{h16}:){{{n}}}");
        // At most `n + 1` groups joined by `:`, or nothing.
        let up = |n: u32| format!("(?:(?:{h16}:){{0,{n}}}{h16})?");
        let v6 = [
            format!("{}{ls32}", g(6)),
            format!("::{}{ls32}", g(5)),
            format!("(?:{h16})?::{}{ls32}", g(4)),
            format!("{}::{}{ls32}", up(1), g(3)),
            format!("{}::{}{ls32}", up(2), g(2)),
            format!("{}::{}{ls32}", up(3), g(1)),
            format!("{}::{ls32}", up(4)),
            format!("{}::{h16}", up(5)),
            format!("{}::", up(6)),
        ]
        .join("|");
        let future = format!("v{hex}+\\.(?:{unreserved}|{sub}|:)+");
        let host = format!("(?:\\[(?:{v6}|{future})\\]|{v4}|(?:{unreserved}|{pct}|{sub})*)");
        let authority = format!("(?:(?:{unreserved}|{pct}|{sub}|:)*@)?{host}(?::[0-9]*)?");
        let segment = format!("{pchar}*");
        let hier = format!("(?://{authority}(?:/{segment})*|/(?:{pchar}+(?:/{segment})*)?|{pchar}+(?:/{segment})*|)");
        let tail = format!("(?:{pchar}|[/?])*");
        Regex::new(&format!("^[A-Za-z][A-Za-z0-9+.-]*:{hier}(?:\\?{tail})?(?:#{tail})?$")).ok()
    });
    re.as_ref().is_some_and(|re| re.is_match(s))
}

/// `is_uuid`: `uuid.UUID(s)` with `-` at positions 8, 13, 18 and 23. Here only the usual
/// spelling: 8-4-4-4-12 hex digits.
fn uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter()
            .enumerate()
            .all(|(i, &c)| if [8, 13, 18, 23].contains(&i) { c == b'-' } else { c.is_ascii_hexdigit() })
}

/// `is_duration`: `isoduration.parse_duration(s)` and a last character among `DMYWHMS`.
/// `P`, then date designators in the order `Y`, `M`, `D`, `W` (any may be left out; `W`
/// after no other), then optionally `T` and time designators in the order `H`, `M`, `S`,
/// each after a number. Here the numbers are ASCII digits only (`isoduration` reads any
/// decimal, also `1,5` and `1e3`), fewer than a million of them (more overflows Python's
/// decimal context), and there is no sign and no `PYYYY-MM-DD…` form.
fn duration(s: &str) -> bool {
    let Some(body) = s.strip_prefix('P') else {
        return false;
    };
    if !s.ends_with(['D', 'M', 'Y', 'W', 'H', 'S']) {
        return false;
    }
    let (date, time) = match body.split_once('T') {
        Some((_, "")) => return false,
        Some((d, t)) => (d, Some(t)),
        None => (body, None),
    };
    // Each `number designator` in order; designators may be skipped but not repeated.
    let units = |text: &str, order: &[char]| -> Option<Vec<char>> {
        let mut seen = Vec::new();
        let mut next = 0;
        let mut number = 0usize;
        for c in text.chars() {
            if c.is_ascii_digit() {
                number += 1;
                continue;
            }
            let at = order[next..].iter().position(|&u| u == c)?;
            if number == 0 || number >= 1_000_000 {
                return None;
            }
            next += at + 1;
            number = 0;
            seen.push(c);
        }
        // Digits after the last designator: the last-character test refuses them.
        (number == 0).then_some(seen)
    };
    let Some(d) = units(date, &['Y', 'M', 'D', 'W']) else {
        return false;
    };
    if d.contains(&'W') && d.len() > 1 {
        return false;
    }
    match time {
        // `T` right after digits is the `PYYYY…T…` form.
        Some(t) => !date.ends_with(|c: char| c.is_ascii_digit()) && units(t, &['H', 'M', 'S']).is_some(),
        None => true,
    }
}

/// `is_json_pointer`: `jsonpointer.JsonPointer(s)`: empty or starting with `/`, every `~`
/// followed by `0` or `1`.
fn json_pointer(s: &str) -> bool {
    let b = s.as_bytes();
    (b.is_empty() || b[0] == b'/')
        && b.iter().enumerate().all(|(i, &c)| c != b'~' || matches!(b.get(i + 1), Some(b'0' | b'1')))
}

#[cfg(test)]
mod tests {
    use super::accepts;

    /// Verdicts of Python's `jsonschema` 4.26 (`Draft202012Validator.FORMAT_CHECKER`),
    /// taken by running it, on strings near each rule's edges.
    #[test]
    fn table_agrees_with_recorded_python_verdicts() {
        let cases: &[(&str, &str, bool)] = &[
            ("date", "2024-02-29", true),
            ("date", "2023-02-29", false),
            ("date", "0000-01-01", false),
            ("date", "0001-01-01", true),
            ("date", "2024-1-01", false),
            ("date-time", "2024-01-01t00:00:00.5z", true),
            ("date-time", "0000-01-01T00:00:00Z", false),
            ("date-time", "2024-01-01T00:00:60Z", false),
            ("date-time", "2024-01-01T00:00:00+24:00", false),
            ("date-time", "2024-01-01T00:00:00.Z", false),
            ("time", "23:59:59-23:59", true),
            ("time", "24:00:00Z", false),
            ("email", "a@", true),
            ("email", "ab", false),
            ("hostname", "a.b.", true),
            ("hostname", "-a", false),
            ("hostname", "a..b", false),
            ("hostname", "", false),
            ("ipv4", "0.0.0.0", true),
            ("ipv4", "01.0.0.0", false),
            ("ipv4", "256.0.0.0", false),
            ("ipv6", "1:2:3:4:5:6:7::", true),
            ("ipv6", "::1.2.3.4", true),
            ("ipv6", "::01.2.3.4", false),
            ("ipv6", "1::2::3", false),
            ("ipv6", "fe80::1%eth0", false),
            ("ipv6", "1:2:3:4:5:6:7:8:9", false),
            ("uri", "a:", true),
            ("uri", "http://[v1.x]/", true),
            ("uri", "http://a b/", false),
            ("uri", "//a/b", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "123e4567e89b12d3a456426614174000", false),
            ("duration", "P1Y2D", true),
            ("duration", "PT1H2S", true),
            ("duration", "P1W", true),
            ("duration", "P1D1W", false),
            ("duration", "P1DT", false),
            ("duration", "PT", false),
            ("duration", "P1", false),
            ("json-pointer", "", true),
            ("json-pointer", "/a~2", false),
            ("json-pointer", "a", false),
        ];
        for &(f, s, python) in cases {
            assert_eq!(accepts(f, s), Some(python), "{f}: {s:?}");
        }
    }
}
