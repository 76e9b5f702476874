//! URI references resolved against a base, as RFC 3986 says.

/// Resolves a URI reference against an absolute base (RFC 3986, section 5.2).
pub(crate) fn resolve_uri(base: &str, r: &str) -> String {
    fn scheme_len(s: &str) -> Option<usize> {
        let i = s.find(':')?;
        let sch = &s[..i];
        let ok = !sch.is_empty()
            && sch.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && sch.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        ok.then_some(i)
    }
    fn split_frag(s: &str) -> (&str, Option<&str>) {
        match s.split_once('#') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        }
    }
    fn split_query(s: &str) -> (&str, Option<&str>) {
        match s.split_once('?') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        }
    }
    /// (authority, path) of a hierarchical part.
    fn split_auth(s: &str) -> (Option<&str>, &str) {
        if let Some(rest) = s.strip_prefix("//") {
            let end = rest.find('/').unwrap_or(rest.len());
            (Some(&rest[..end]), &rest[end..])
        } else {
            (None, s)
        }
    }
    fn remove_dots(path: &str) -> String {
        let mut out: Vec<&str> = Vec::new();
        let segs: Vec<&str> = path.split('/').collect();
        let n = segs.len();
        for (i, seg) in segs.iter().enumerate() {
            match *seg {
                "." => {
                    if i == n - 1 {
                        out.push("");
                    }
                }
                ".." => {
                    if out.len() > 1 {
                        out.pop();
                    }
                    if i == n - 1 {
                        out.push("");
                    }
                }
                s => out.push(s),
            }
        }
        out.join("/")
    }
    let fmt = |scheme: &str, auth: Option<&str>, path: &str, query: Option<&str>, frag: Option<&str>| {
        let mut s = format!("{scheme}:");
        if let Some(a) = auth {
            s.push_str("//");
            s.push_str(a);
        }
        s.push_str(path);
        if let Some(q) = query {
            s.push('?');
            s.push_str(q);
        }
        if let Some(f) = frag {
            s.push('#');
            s.push_str(f);
        }
        s
    };
    if let Some(i) = scheme_len(r) {
        let (rest, frag) = split_frag(&r[i + 1..]);
        let (rest, query) = split_query(rest);
        let (auth, path) = split_auth(rest);
        let path = if path.starts_with('/') { remove_dots(path) } else { path.to_string() };
        return fmt(&r[..i], auth, &path, query, frag);
    }
    let Some(bi) = scheme_len(base) else { return r.to_string() };
    let scheme = &base[..bi];
    let (brest, _) = split_frag(&base[bi + 1..]);
    let (brest, bquery) = split_query(brest);
    let (bauth, bpath) = split_auth(brest);
    let (rrest, rfrag) = split_frag(r);
    let (rrest, rquery) = split_query(rrest);
    if rrest.starts_with("//") {
        let (a, p) = split_auth(rrest);
        return fmt(scheme, a, &remove_dots(p), rquery, rfrag);
    }
    if rrest.is_empty() {
        return fmt(scheme, bauth, bpath, rquery.or(bquery), rfrag);
    }
    let path = if rrest.starts_with('/') {
        remove_dots(rrest)
    } else {
        let merged = if bauth.is_some() && bpath.is_empty() {
            format!("/{rrest}")
        } else {
            match bpath.rfind('/') {
                Some(i) => format!("{}{rrest}", &bpath[..=i]),
                None => rrest.to_string(),
            }
        };
        remove_dots(&merged)
    };
    fmt(scheme, bauth, &path, rquery, rfrag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_resolution_follows_rfc3986() {
        let b = "http://a/b/c/d;p?q";
        for (r, want) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("#s", "http://a/b/c/d;p?q#s"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("", "http://a/b/c/d;p?q"),
            ("urn:x:y", "urn:x:y"),
        ] {
            assert_eq!(resolve_uri(b, r), want, "{r}");
        }
    }
}
