//! The `format` keyword: string grammars for the common formats.
//!
//! Input: a format name. Output: an [`Expr`] for the string *content* (between the quotes),
//! or `None` for formats this module does not know.
//!
//! Every grammar here is a **subset** of what the format allows (so everything accepted is a
//! valid instance for validators that check formats), chosen to contain the usual spellings:
//! `date-time` uses `T` and `Z`/`±hh:mm` (either case), days are valid for their month and
//! year (29 February in leap years only; no leap seconds), years run from 0001 to 9999 (RFC
//! 3339 allows 0000, which Python's `datetime`, and so `jsonschema`'s checkers, refuse),
//! numbers in durations have at most 1000 digits, host names are at most 13
//! labels, shorter along the name (`HOST_LABELS`), `uri` is
//! `scheme://[userinfo@]host[:port][/path][?query][#fragment]`, `file:///path`,
//! `scheme:/path`, `scheme:path` or `scheme:` with RFC 3986 path characters and percent
//! escapes (its hosts: labels and dots, any number, or an IPv6 address in brackets). None of
//! these contain characters that need escaping in JSON.
//!
//! What a grammar accepts, every common validator accepts: the `jsonschema` crate with formats
//! asserted and Python's `jsonschema` with its format extras, where they differ from the
//! RFCs too (year 0000, a number of a million digits). The test module `probe` holds them
//! to it, on edge values, random walks of each grammar and near misses.

use crate::grammar::Expr;

#[cfg(test)]
mod probe;
#[cfg(test)]
mod python;

fn d(lo: u8, hi: u8) -> Expr {
    Expr::Bytes(vec![(lo, hi)])
}

fn digits(n: u32) -> Expr {
    Expr::repeat(d(b'0', b'9'), n, Some(n))
}

fn hex() -> Expr {
    Expr::Bytes(vec![(b'0', b'9'), (b'A', b'F'), (b'a', b'f')])
}

/// `YYYY-MM-DD` with a year from 0001 to 9999 and a day that exists in that month and year.
fn full_date() -> Expr {
    let day_28 = Expr::alt([
        Expr::seq([d(b'0', b'0'), d(b'1', b'9')]),
        Expr::seq([d(b'1', b'1'), d(b'0', b'9')]),
        Expr::seq([d(b'2', b'2'), d(b'0', b'8')]),
    ]);
    let day_30 = Expr::alt([day_28.clone(), Expr::lit("29"), Expr::lit("30")]);
    let day_31 = Expr::alt([day_30.clone(), Expr::lit("31")]);
    let month_day = Expr::alt([
        Expr::seq([Expr::lit("02-"), day_28]),
        Expr::seq([
            Expr::alt([Expr::lit("04"), Expr::lit("06"), Expr::lit("09"), Expr::lit("11")]),
            Expr::lit("-"),
            day_30,
        ]),
        Expr::seq([
            Expr::alt([
                Expr::lit("01"),
                Expr::lit("03"),
                Expr::lit("05"),
                Expr::lit("07"),
                Expr::lit("08"),
                Expr::lit("10"),
                Expr::lit("12"),
            ]),
            Expr::lit("-"),
            day_31,
        ]),
    ]);
    // 29 February only in leap years: divisible by 4, and by 400 when a century (`YY00`
    // with `YY` divisible by 4). Two digits are a multiple of 4 when an even digit is
    // followed by 0, 4 or 8, or an odd one by 2 or 6.
    let after_even = || Expr::one_of_bytes(b"048");
    // The last two digits of a year divisible by 4, `00` aside.
    let by_4 = Expr::alt([
        Expr::seq([d(b'0', b'0'), Expr::one_of_bytes(b"48")]),
        Expr::seq([Expr::one_of_bytes(b"2468"), after_even()]),
        Expr::seq([Expr::one_of_bytes(b"13579"), Expr::one_of_bytes(b"26")]),
    ]);
    // Year 0000 (which RFC 3339 allows) is left out: Python's `datetime` has no year 0, so
    // `jsonschema`'s `date` and `date-time` checkers refuse it.
    let leap_year = Expr::alt([Expr::seq([digits(2), by_4.clone()]), Expr::seq([by_4, Expr::lit("00")])]);
    Expr::alt([Expr::seq([year(), Expr::lit("-"), month_day]), Expr::seq([leap_year, Expr::lit("-02-29")])])
}

/// A year from `0001` to `9999`: four digits, not all zero.
fn year() -> Expr {
    let nz = || d(b'1', b'9');
    Expr::alt([
        Expr::seq([nz(), digits(3)]),
        Expr::seq([Expr::lit("0"), nz(), digits(2)]),
        Expr::seq([Expr::lit("00"), nz(), digits(1)]),
        Expr::seq([Expr::lit("000"), nz()]),
    ])
}

fn two(max_first: u8, max_second_when_max_first: u8) -> Expr {
    Expr::alt([
        Expr::seq([d(b'0', max_first - 1), d(b'0', b'9')]),
        Expr::seq([d(max_first, max_first), d(b'0', max_second_when_max_first)]),
    ])
}

/// `hh:mm:ss(.f…)?` with hours 00–23, any number of fraction digits, and no leap second.
fn partial_time() -> Expr {
    let hour = two(b'2', b'3');
    let min = Expr::seq([d(b'0', b'5'), d(b'0', b'9')]);
    Expr::seq([
        hour,
        Expr::lit(":"),
        min.clone(),
        Expr::lit(":"),
        min,
        Expr::opt(Expr::seq([Expr::lit("."), Expr::repeat(d(b'0', b'9'), 1, None)])),
    ])
}

fn offset() -> Expr {
    let hour = two(b'2', b'3');
    let min = Expr::seq([d(b'0', b'5'), d(b'0', b'9')]);
    let zulu = Expr::one_of_bytes(b"Zz");
    Expr::alt([zulu, Expr::seq([Expr::one_of_bytes(b"+-"), hour, Expr::lit(":"), min])])
}

/// A host-name label of at most `max` (≥ 4) characters: letters, digits and inner hyphens,
/// never `--` in the third and fourth positions. That leaves out every A-label (`xn--…`,
/// whose punycode would need checking) and the other reserved `??--` labels: an
/// under-approximation of RFC 1123 / 5890 host names.
fn label(max: u32) -> Expr {
    let alnum = Expr::Bytes(vec![(b'0', b'9'), (b'A', b'Z'), (b'a', b'z')]);
    let ldh = Expr::Bytes(vec![(b'-', b'-'), (b'0', b'9'), (b'A', b'Z'), (b'a', b'z')]);
    // One to `k` characters, the last a letter or digit.
    let end = |k: u32| Expr::seq([Expr::repeat(ldh.clone(), 0, Some(k - 1)), alnum.clone()]);
    Expr::alt([
        // 1 or 2 characters.
        Expr::seq([alnum.clone(), Expr::opt(alnum.clone())]),
        // 3 or more, the third a letter or digit.
        Expr::seq([alnum.clone(), ldh.clone(), alnum.clone(), Expr::opt(end(max - 3))]),
        // 4 or more, the third a hyphen: the fourth is a letter or digit.
        Expr::seq([alnum.clone(), ldh.clone(), Expr::lit("-"), alnum.clone(), Expr::opt(end(max - 4))]),
    ])
}

/// `parts[0]`, then optionally `sep parts[1]`, and after it optionally `sep parts[2]`, …:
/// a list whose `i`-th item is `parts[i]`, spelled as one deterministic chain.
fn chain(parts: &[Expr], sep: &str) -> Expr {
    let mut rest = Expr::Empty;
    for part in parts[1..].iter().rev() {
        rest = Expr::opt(Expr::seq([Expr::lit(sep), part.clone(), rest]));
    }
    Expr::seq([parts[0].clone(), rest])
}

/// The longest label of each position in a host name (see [`hostname`]).
const HOST_LABELS: [u32; 13] = [63, 40, 24, 16, 12, 12, 12, 12, 10, 10, 10, 10, 10];

/// Host names: one to 13 labels (see [`label`]), the `i`-th at most [`HOST_LABELS`]`[i]`
/// characters long, so at most 253 characters in all, within RFC 1123's 253.
///
/// The limits fall along the name so that the shape stays one chain: a union of shapes
/// (four labels of 63 characters, or eight of 30) keeps two parse stacks inside every label,
/// and made a mask over the vocabulary take about 20 ms there (against 2 ms).
fn hostname() -> Expr {
    let labels: Vec<Expr> = HOST_LABELS.iter().map(|&n| label(n)).collect();
    chain(&labels, ".")
}

/// What [`format_expr`] leaves out of a format that validators accept, for formats where
/// that is more than spelling variants: said to the user as a compile note.
pub fn under_approximation(name: &str) -> Option<&'static str> {
    match name {
        "date" => Some("format \"date\" is compiled with years 0001-9999 (RFC 3339 allows 0000, Python's jsonschema does not)"),
        "date-time" => Some(
            "format \"date-time\" is compiled with years 0001-9999 (RFC 3339 allows 0000, Python's jsonschema does not)",
        ),
        "hostname" => Some(
            "format \"hostname\" is compiled without A-labels (labels with `--` in positions 3-4, like `xn--`) and with at most 13 labels, of at most 63, 40, 24, 16, 12 and then 10 characters",
        ),
        "email" => Some(
            "format \"email\" is compiled with at most 4 dot-separated words of at most 26, 20, 12 and 3 characters before the @ (no quoted local part), and a domain of at most 13 labels (of at most 63, 40, 24, 16, 12 and then 10 characters) without A-labels, or an address literal",
        ),
        _ => None,
    }
}

fn ipv4() -> Expr {
    let octet = Expr::alt([
        Expr::seq([Expr::lit("25"), d(b'0', b'5')]),
        Expr::seq([Expr::lit("2"), d(b'0', b'4'), d(b'0', b'9')]),
        Expr::seq([Expr::lit("1"), d(b'0', b'9'), d(b'0', b'9')]),
        Expr::seq([d(b'1', b'9'), d(b'0', b'9')]),
        d(b'0', b'9'),
    ]);
    Expr::seq([octet.clone(), Expr::repeat(Expr::seq([Expr::lit("."), octet]), 3, Some(3))])
}

/// RFC 4291 text form: eight groups, or fewer around one `::`, and the last 32 bits may be
/// written as an IPv4 address (`::ffff:192.168.0.1`, `1:2:3:4:5:6:1.2.3.4`).
fn ipv6() -> Expr {
    let h16 = Expr::repeat(hex(), 1, Some(4));
    let v4 = ipv4();
    // `lo` to `hi` groups, each followed by `:`.
    let colons = |lo: u32, hi: u32| Expr::repeat(Expr::seq([h16.clone(), Expr::lit(":")]), lo, Some(hi));
    // Exactly `n` groups joined by `:`.
    let groups = |n: u32| if n == 0 { Expr::Empty } else { Expr::seq([colons(n - 1, n - 1), h16.clone()]) };
    // At most `n` groups joined by `:`.
    let upto = |n: u32| if n == 0 { Expr::Empty } else { Expr::opt(Expr::seq([colons(0, n - 1), h16.clone()])) };
    // The last 32 bits as an IPv4 address after at most `n` groups, each followed by `:`.
    let v4_after = |n: u32| Expr::seq([colons(0, n), v4.clone()]);
    let mut alts = vec![groups(8), Expr::seq([colons(6, 6), v4.clone()])];
    // `::` stands for at least one group: at most seven are written around it, an IPv4
    // tail counting as two.
    for before in 0..=7 {
        alts.push(Expr::seq([groups(before), Expr::lit("::"), upto(7 - before)]));
        if before <= 5 {
            alts.push(Expr::seq([groups(before), Expr::lit("::"), v4_after(5 - before)]));
        }
    }
    Expr::alt(alts)
}

fn uuid() -> Expr {
    let h = |n: u32| Expr::repeat(hex(), n, Some(n));
    Expr::seq([h(8), Expr::lit("-"), h(4), Expr::lit("-"), h(4), Expr::lit("-"), h(4), Expr::lit("-"), h(12)])
}

/// The longest word of each position in an email's local part (see [`email`]).
const LOCAL_WORDS: [u32; 4] = [26, 20, 12, 3];

/// RFC 5322 `dot-atom` local parts (every `atext` character: `te~st`, `o'brien`, `a#b`) of
/// at most four words, the `i`-th at most [`LOCAL_WORDS`]`[i]` characters long (64 in all,
/// RFC 5321's limit), `@`, and a [`hostname`] (`a@b` is an address) or an RFC 5321 address
/// literal (`[127.0.0.1]`, `[IPv6:::1]`).
fn email() -> Expr {
    let atext = Expr::Bytes(vec![
        (b'!', b'!'),
        (b'#', b'\''),
        (b'*', b'+'),
        (b'-', b'-'),
        (b'/', b'9'),
        (b'=', b'='),
        (b'?', b'?'),
        (b'A', b'Z'),
        (b'^', b'~'),
    ]);
    let words: Vec<Expr> = LOCAL_WORDS.iter().map(|&n| Expr::repeat(atext.clone(), 1, Some(n))).collect();
    let local = chain(&words, ".");
    let literal =
        Expr::seq([Expr::lit("["), Expr::alt([ipv4(), Expr::seq([Expr::lit("IPv6:"), ipv6()])]), Expr::lit("]")]);
    Expr::seq([local, Expr::lit("@"), Expr::alt([hostname(), literal])])
}

/// The most digits of a number in a [`duration`]. Python's `isoduration` reads a number as a
/// decimal of its default context, which overflows (an exception, not a verdict) at a
/// million digits.
const DURATION_DIGITS: u32 = 1000;

/// RFC 3339 appendix A durations: each unit may be followed only by the next one (`P1Y2D`
/// and `PT1H2S` are not durations), weeks stand alone; a number has 1 to
/// [`DURATION_DIGITS`] digits.
fn duration() -> Expr {
    let n = Expr::repeat(d(b'0', b'9'), 1, Some(DURATION_DIGITS));
    let unit = |u: &str| Expr::seq([n.clone(), Expr::lit(u)]);
    // `first`, optionally followed by `second`, optionally followed by `third`.
    let chain = |a: &str, b: &str, c: &str| Expr::seq([unit(a), Expr::opt(Expr::seq([unit(b), Expr::opt(unit(c))]))]);
    let date = Expr::alt([chain("Y", "M", "D"), Expr::seq([unit("M"), Expr::opt(unit("D"))]), unit("D")]);
    let time = Expr::seq([
        Expr::lit("T"),
        Expr::alt([chain("H", "M", "S"), Expr::seq([unit("M"), Expr::opt(unit("S"))]), unit("S")]),
    ]);
    Expr::seq([Expr::lit("P"), Expr::alt([Expr::seq([date, Expr::opt(time.clone())]), time, unit("W")])])
}

/// RFC 3986's unreserved characters, sub-delimiters and `:`, and `@` when `at`: a path
/// character (`pchar`) or, without `@`, a `userinfo` one, short of percent escapes.
fn uri_plain(at: bool) -> Expr {
    Expr::Bytes(vec![
        (b'!', b'!'),
        (b'$', b'$'),
        (b'&', b'.'),
        (b'0', b';'),
        (b'=', b'='),
        (if at { b'@' } else { b'A' }, b'Z'),
        (b'_', b'_'),
        (b'a', b'z'),
        (b'~', b'~'),
    ])
}

fn uri() -> Expr {
    let alpha = Expr::Bytes(vec![(b'A', b'Z'), (b'a', b'z')]);
    let scheme = Expr::seq([
        alpha,
        Expr::repeat(
            Expr::Bytes(vec![(b'0', b'9'), (b'A', b'Z'), (b'a', b'z'), (b'+', b'+'), (b'-', b'.')]),
            0,
            Some(30),
        ),
    ]);
    let pct = Expr::seq([Expr::lit("%"), hex(), hex()]);
    // RFC 3986 pchar: a plain character or a percent escape.
    let pchar = Expr::alt([uri_plain(true), pct.clone()]);
    // RFC 3986 lets the port be empty (`http://a:/b`); a written one is 1 to 9999 here.
    let port =
        Expr::seq([Expr::lit(":"), Expr::opt(Expr::seq([d(b'1', b'9'), Expr::repeat(d(b'0', b'9'), 0, Some(3))]))]);
    let path = Expr::star(Expr::seq([Expr::lit("/"), Expr::star(pchar.clone())]));
    let qchar = Expr::alt([pchar.clone(), Expr::Bytes(vec![(b'/', b'/'), (b'?', b'?')])]);
    let query = Expr::opt(Expr::seq([Expr::lit("?"), Expr::star(qchar.clone())]));
    let frag = Expr::opt(Expr::seq([Expr::lit("#"), Expr::star(qchar)]));
    // A `reg-name` of dot-separated labels of letters, digits and inner hyphens, any number
    // of them, with an optional trailing dot (`example.com.`); RFC 3986 sets no length.
    let alnum = Expr::Bytes(vec![(b'0', b'9'), (b'A', b'Z'), (b'a', b'z')]);
    let ldh = Expr::Bytes(vec![(b'-', b'-'), (b'0', b'9'), (b'A', b'Z'), (b'a', b'z')]);
    let host_label = Expr::seq([alnum.clone(), Expr::opt(Expr::seq([Expr::star(ldh), alnum]))]);
    let host =
        Expr::seq([host_label.clone(), Expr::star(Expr::seq([Expr::lit("."), host_label])), Expr::opt(Expr::lit("."))]);
    // An IPv6 address in brackets (`[2001:db8::7]`); IPv4 addresses are spelled as names.
    let host = Expr::alt([host, Expr::seq([Expr::lit("["), ipv6(), Expr::lit("]")])]);
    // `userinfo@`: pchar but `@` (`user:pass@`, `-.~_!$&'()*+,;=:%40@`).
    let userinfo = Expr::seq([Expr::star(Expr::alt([uri_plain(false), pct])), Expr::lit("@")]);
    let segments = Expr::seq([pchar.clone(), Expr::star(pchar), path.clone()]);
    // `scheme://[userinfo@]host[:port]/path`, `scheme:/path`, `scheme:path` (`urn:isbn:123`,
    // `mailto:a@b.c`) or `scheme:` alone.
    let hier = Expr::alt([
        Expr::seq([Expr::lit("//"), Expr::opt(userinfo), host, Expr::opt(port), path.clone()]),
        Expr::seq([Expr::lit("/"), Expr::opt(segments.clone())]),
        segments,
        Expr::Empty,
    ]);
    // `file:///path`: the one scheme whose URIs usually leave the host empty (RFC 8089);
    // other schemes keep a host after `//`, as URL parsers want for `http` and the like.
    let file = Expr::seq([Expr::lit("file://"), path]);
    Expr::seq([Expr::alt([Expr::seq([scheme, Expr::lit(":"), hier]), file]), query, frag])
}

/// The grammar of a known format's content, or `None` when the format is unknown here.
pub fn format_expr(name: &str) -> Option<Expr> {
    Some(match name {
        "date-time" => Expr::seq([full_date(), Expr::one_of_bytes(b"Tt"), partial_time(), offset()]),
        "date" => full_date(),
        "time" => Expr::seq([partial_time(), offset()]),
        "duration" => duration(),
        "email" => email(),
        "hostname" => hostname(),
        "ipv4" => ipv4(),
        "ipv6" => ipv6(),
        "uuid" => uuid(),
        "uri" => uri(),
        _ => return None,
    })
}

/// Formats that validators check but this module has no grammar for: a schema using one is
/// refused rather than compiled to "any string".
pub fn is_checked_elsewhere(name: &str) -> bool {
    matches!(
        name,
        "idn-email"
            | "idn-hostname"
            | "iri"
            | "iri-reference"
            | "uri-reference"
            | "uri-template"
            | "json-pointer"
            | "relative-json-pointer"
            | "regex"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::Pda;
    use crate::grammar::GrammarBuilder;
    use crate::Limits;

    fn pda(name: &str) -> Pda {
        let mut b = GrammarBuilder::new();
        let r = b.add("root", format_expr(name).unwrap());
        Pda::build(&b.build(r).unwrap(), &Limits::default()).unwrap()
    }

    /// The per-position limits keep every host name within RFC 1123's 253 characters and
    /// every local part within RFC 5321's 64 (the lists' sums plus the dots between items).
    #[test]
    fn length_limits_hold() {
        let longest = |parts: &[u32]| parts.iter().sum::<u32>() + parts.len() as u32 - 1;
        assert!(longest(&HOST_LABELS) <= 253);
        assert!(longest(&LOCAL_WORDS) <= 64);
        assert!(HOST_LABELS.iter().all(|&n| (4..=63).contains(&n)), "label() needs 4..=63");
    }

    #[test]
    fn formats_accept_usual_and_reject_bad() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "date-time",
                &[
                    "2024-01-31T12:30:00Z",
                    "2024-04-30T23:59:59.123+02:00",
                    "2024-02-29t00:00:00z",
                    "1985-04-12T00:59:59.999999999999999Z",
                ],
                &[
                    "2024-02-30T12:00:00Z",
                    "2024-01-01 12:00:00Z",
                    "2024-01-01T24:00:00Z",
                    "2023-02-29T00:00:00Z",
                    "0000-01-01T00:00:00Z",
                ],
            ),
            (
                "date",
                &[
                    "1999-12-31",
                    "2000-02-28",
                    "2000-02-29",
                    "2024-02-29",
                    "1996-02-29",
                    "0004-02-29",
                    "0001-01-01",
                    "2400-02-29",
                ],
                &[
                    "0000-01-01",
                    "0000-02-29",
                    "1999-13-01",
                    "1999-04-31",
                    "99-01-01",
                    "1900-02-29",
                    "2023-02-29",
                    "2100-02-29",
                    "2002-02-29",
                ],
            ),
            ("time", &["08:15:00Z", "23:00:00-05:00"], &["8:15:00Z", "12:60:00Z"]),
            (
                "duration",
                &["P1D", "PT5M", "P1Y2M3DT4H5M6S", "P2W", "P99999999999999999999D"],
                &["P", "PT", "1D", "P1H", "PT1D", "P1YT", "P1Y2D", "PT1H2S"],
            ),
            (
                "email",
                &[
                    "john.doe@example.com",
                    "a+b@mail.co.uk",
                    "te~st@example.com",
                    "o'brien#1@x.org",
                    "a@b",
                    "{x}|y@h-1.io",
                    "joe.bloggs@[127.0.0.1]",
                    "joe.bloggs@[IPv6:::1]",
                    "first.middle.last.x@mail.dept.example.co.uk",
                ],
                &[
                    "a@[1.2.3]",
                    "a@[::1]",
                    "a@[IPv6:1.2.3.4]",
                    "@example.com",
                    "john@",
                    "a b@x.com",
                    ".a@b.c",
                    "a.@b.c",
                    "a..b@c.d",
                    "a@b.",
                    "a\"b@c.d",
                    "a(b)@c.d",
                ],
            ),
            (
                "hostname",
                &["example.com", "a-b.c", "ab-c.d", "a-bc", "xy", "a.b.c.d.e", "mail.server.dept.example.co.uk"],
                &[
                    "-a.com",
                    "a..b",
                    "a_b.com",
                    "xn--hello-txk.com",
                    "ab--c",
                    "a-",
                    "ab-",
                    // 14 labels; a ninth label of 11 characters (beyond `HOST_LABELS`).
                    "a.b.c.d.e.f.g.h.i.j.k.l.m.n",
                    "a.b.c.d.e.f.g.h.abcdefghijk",
                ],
            ),
            ("ipv4", &["192.168.0.1", "0.0.0.0", "255.255.255.255"], &["256.1.1.1", "01.2.3.4", "1.2.3"]),
            (
                "ipv6",
                &[
                    "::1",
                    "2001:db8::8a2e:370:7334",
                    "1:2:3:4:5:6:7:8",
                    "::",
                    "::ffff:192.168.0.1",
                    "1::d6:192.168.0.1",
                    "1:2::192.168.0.1",
                    "1000:1000:1000:1000:1000:1000:255.255.255.255",
                    "::1.2.3.4",
                ],
                &[
                    "1:2:3:4:5:6:7:8:9",
                    "1::2::3",
                    "12345::",
                    "1:2:3:4:5:6:7:1.2.3.4",
                    "1::2:3:4:5:6:1.2.3.4",
                    "::256.1.1.1",
                    "::1.2.3",
                    "1.2.3.4",
                ],
            ),
            (
                "uuid",
                &["123e4567-e89b-12d3-a456-426614174000"],
                &["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"],
            ),
            (
                "uri",
                &[
                    "https://example.com/a/b?x=1#top",
                    "http://localhost:8080",
                    "urn:isbn:0451450523",
                    "ecdsa-koblitz-pubkey:14RZvYa",
                    "https://e.org/wiki/Mass%E2%80%93energy",
                    "https://e.com/*",
                    "s:",
                    "https:/",
                    "https:/a/b",
                    "http://example.com./x",
                    "http://a.b.c.d.e.f.example.com",
                    "ldap://[2001:db8::7]/c=GB?objectClass?one",
                    "http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com",
                    "ftp://user:pass@host:21/f",
                    "file:///C:/Users/me/Templates",
                    "file:///path/to/file1.js",
                    "http://a:/b",
                    "http://a:",
                ],
                &[
                    "example.com",
                    "https://",
                    "http://[1.2.3.4]/",
                    "http://a@b@c/",
                    "https://a b.com",
                    "1http://a.com",
                    "https://e.com/%zz",
                    "http://a..b/",
                ],
            ),
        ];
        for (name, good, bad) in cases {
            let p = pda(name);
            // What the grammar accepts is what the validator calls the format.
            let v = jsonschema::options()
                .should_validate_formats(true)
                .build(&serde_json::json!({"format": name}))
                .expect("format schema");
            for g in *good {
                assert!(p.matches(g.as_bytes()), "{name}: {g}");
                assert!(v.is_valid(&serde_json::json!(g)), "{name}: the validator refuses {g}");
            }
            for b in *bad {
                assert!(!p.matches(b.as_bytes()), "{name}: {b}");
            }
        }
    }
}
