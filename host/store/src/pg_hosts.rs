//! Several PostgreSQL hosts, one primary. `--database-url` may list hosts as libpq does
//! (`postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write`, or the keyword form
//! `host=h1,h2 port=5432,5433 dbname=db user=u`); botbox then works on the one that accepts
//! writes and follows a promotion by itself.
//!
//! How: every database connection of the process (the pool's and any other) goes to a
//! forwarder on a loopback port of its own, which passes each new connection on to the
//! current primary. A supervisor finds the primary (the first host, in the order given,
//! whose `transaction_read_only` is off), checks it every [`CHECK_EVERY`], and when it is
//! gone or read-only tries the hosts again, with a growing pause, until one has been
//! promoted. Connections forwarded to a host that is no longer the primary are cut, so the
//! pool opens new ones to the new primary. While there is none, new connections wait up
//! to [`CONNECT_WAIT`] and then fail: `/ready` answers 503 (`database`) in that time.
//!
//! Cost: every byte to and from the database crosses the loopback once more, copied by a
//! runtime task each way, and the supervisor opens one connection a second to check the
//! primary. A single host has no forwarder. The forwarder passes bytes through, TLS included; `sslmode=verify-full` cannot check
//! the host name through it (it sees 127.0.0.1), so with several hosts use `require` or
//! `verify-ca`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How often the supervisor checks that the primary still accepts writes.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long one probe of a host may take (connect and one query).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a new connection waits for a primary before it fails.
pub const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// The longest pause between two rounds of probes while no host accepts writes.
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// A database URL with several hosts: the hosts in order, and the URL without them.
#[derive(Debug, Clone, PartialEq)]
pub struct HostList {
    pub hosts: Vec<(String, u16)>,
    /// `postgres://user:password@{host}/db?params`, `{host}` standing for `host:port`.
    template: String,
}

impl HostList {
    /// The URL that reaches `host:port` (a host's own, or the forwarder's).
    pub fn url_for(&self, host: &str, port: u16) -> String {
        let host = if host.contains(':') {
            format!("[{host}]") // an IPv6 address
        } else {
            host.to_owned()
        };
        self.template.replace("{host}", &format!("{host}:{port}"))
    }

    /// `h1:5432, h2:5433`, for messages.
    pub fn names(&self) -> String {
        let names: Vec<String> = self.hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        names.join(", ")
    }
}

/// What `--database-url` names: one database URL as sqlx takes it, or several hosts.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    One(String),
    Several(HostList),
}

/// Reads a PostgreSQL `--database-url`: a URL (one host or a comma-separated list) or the
/// keyword form (`host=… port=… dbname=… user=…`). A list of one host is [`Target::One`].
pub fn parse(spec: &str) -> Result<Target, String> {
    let spec = spec.trim();
    let url = spec.starts_with("postgres://") || spec.starts_with("postgresql://");
    let authority = spec.split_once("://").map_or("", |(_, r)| {
        let end = r.find(['/', '?']).unwrap_or(r.len());
        &r[..end]
    });
    if url && !authority.contains(',') {
        // One host (or none, with `?host=/socket/dir`): the URL goes to the driver as given.
        return Ok(Target::One(spec.to_owned()));
    }
    let (hosts, template) = if url {
        from_url(spec)?
    } else {
        from_keywords(spec)?
    };
    if hosts.is_empty() {
        return Err("no host".into());
    }
    let list = HostList { hosts, template };
    Ok(match &list.hosts[..] {
        [(h, p)] => Target::One(list.url_for(h, *p)),
        _ => Target::Several(list),
    })
}

/// `postgres://userinfo@h1:p1,h2:p2/db?query`.
fn from_url(spec: &str) -> Result<(Vec<(String, u16)>, String), String> {
    let (scheme, rest) = spec.split_once("://").expect("checked by the caller");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let (tail, query) = tail.split_once('?').unwrap_or((tail, ""));
    let query = session_attrs(query.split('&').filter(|p| !p.is_empty()), '=')?;
    let hosts = hosts
        .split(',')
        .map(host_port)
        .collect::<Result<Vec<_>, _>>()?;
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
    };
    Ok((hosts, format!("{scheme}://{userinfo}{{host}}{tail}{query}")))
}

/// `h`, `h:p`, `[v6]` or `[v6]:p`; the port defaults to 5432.
fn host_port(s: &str) -> Result<(String, u16), String> {
    let s = s.trim();
    let (host, port) = match s.strip_prefix('[') {
        Some(v6) => {
            let (h, rest) = v6
                .split_once(']')
                .ok_or_else(|| format!("host {s:?}: no ']'"))?;
            (h, rest.strip_prefix(':'))
        }
        None => match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        },
    };
    if host.is_empty() {
        return Err(format!("an empty host in the list ({s:?})"));
    }
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("host {s:?}: the port is not a number"))?,
        None => 5432,
    };
    Ok((host.to_owned(), port))
}

/// The parameters but `target_session_attrs`, which must ask for the writable host (botbox
/// writes): absent, `read-write` or `primary`.
fn session_attrs<'a>(
    pairs: impl Iterator<Item = &'a str>,
    sep: char,
) -> Result<Vec<String>, String> {
    let mut kept = vec![];
    for pair in pairs {
        match pair.split_once(sep) {
            Some(("target_session_attrs", "read-write" | "primary")) => {}
            Some(("target_session_attrs", other)) => {
                return Err(format!(
                    "target_session_attrs={other}: botbox writes, so it needs the primary (read-write)"
                ));
            }
            _ => kept.push(pair.to_owned()),
        }
    }
    Ok(kept)
}

/// `host=h1,h2 port=5432,5433 dbname=db user=u password=p sslmode=require`.
fn from_keywords(spec: &str) -> Result<(Vec<(String, u16)>, String), String> {
    let mut hosts = vec![];
    let mut ports = vec![];
    let (mut user, mut password, mut db) = (None, None, None);
    let mut params = vec![];
    for (k, v) in keyword_pairs(spec)? {
        let v = v.as_str();
        match k.as_str() {
            "host" | "hostaddr" => hosts = v.split(',').map(str::to_owned).collect(),
            "port" => ports = v.split(',').map(str::to_owned).collect(),
            "user" => user = Some(v.to_owned()),
            "password" => password = Some(v.to_owned()),
            "dbname" => db = Some(v.to_owned()),
            _ => params.push(format!("{k}={v}")),
        }
    }
    let params = session_attrs(params.iter().map(String::as_str), '=')?;
    if ports.len() > 1 && ports.len() != hosts.len() {
        return Err(format!(
            "{} hosts but {} ports: give one port, or one per host",
            hosts.len(),
            ports.len()
        ));
    }
    let hosts = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports
                .get(i)
                .or(ports.first())
                .map_or("5432", String::as_str);
            let port = port
                .parse()
                .map_err(|_| format!("port {port:?} is not a number"))?;
            Ok((h.trim().to_owned(), port))
        })
        .collect::<Result<Vec<_>, String>>()?;
    // Percent-encoded as URLs take a user, a password or a database name.
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let userinfo = match (user, password) {
        (Some(u), Some(p)) => format!("{}:{}@", enc(&u), enc(&p)),
        (Some(u), None) => format!("{}@", enc(&u)),
        _ => String::new(),
    };
    let query = if params.is_empty() {
        String::new()
    } else {
        format!("?{}", params.join("&"))
    };
    let db = db.map(|d| format!("/{}", enc(&d))).unwrap_or_default();
    Ok((hosts, format!("postgres://{userinfo}{{host}}{db}{query}")))
}

/// `key=value` pairs as libpq reads them: spaces separate pairs, a value may be quoted
/// (`password='a b'`, `\'` and `\\` inside).
fn keyword_pairs(spec: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = vec![];
    let mut chars = spec.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        if chars.next() != Some('=') {
            return Err(format!(
                "{key:?}: expected key=value (or a postgres:// URL)"
            ));
        }
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("{key}: the quote is not closed")),
                }
            }
        } else {
            value.extend(std::iter::from_fn(|| chars.next_if(|c| !c.is_whitespace())));
        }
        out.push((key, value));
    }
}

/// The primary of a [`HostList`] and the forwarder to it.
#[derive(Debug)]
pub struct Primary {
    list: HostList,
    /// The index of the host that accepts writes, `None` while there is none.
    current: watch::Sender<Option<usize>>,
    /// Switches of primary since the start (the first choice included).
    switches: AtomicU64,
}

impl Primary {
    /// Starts the forwarder and its supervisor; answers once a primary is found (within
    /// `first_wait`) with the URL every connection of this process should use.
    pub async fn start(
        list: HostList,
        first_wait: Duration,
    ) -> anyhow::Result<(Arc<Primary>, String)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let local = listener.local_addr()?;
        let primary = Arc::new(Primary {
            list,
            current: watch::channel(None).0,
            switches: AtomicU64::new(0),
        });
        tokio::spawn(supervise(Arc::downgrade(&primary)));
        tokio::spawn(forward(Arc::downgrade(&primary), listener));
        let mut rx = primary.current.subscribe();
        if tokio::time::timeout(first_wait, rx.wait_for(Option::is_some))
            .await
            .is_err()
        {
            anyhow::bail!(
                "no database host accepts writes ({}): none answered as a primary within {} s",
                primary.list.names(),
                first_wait.as_secs()
            );
        }
        let url = primary.list.url_for(&local.ip().to_string(), local.port());
        Ok((primary, url))
    }

    /// The host in use, if any (`host:port`).
    pub fn host(&self) -> Option<String> {
        let i = (*self.current.borrow())?;
        let (h, p) = &self.list.hosts[i];
        Some(format!("{h}:{p}"))
    }

    /// Switches of primary since the start (the first choice counts one).
    pub fn switches(&self) -> u64 {
        self.switches.load(Ordering::Relaxed)
    }

    fn set(&self, to: Option<usize>) {
        let was = *self.current.borrow();
        if was == to {
            return;
        }
        let name = |i: Option<usize>| {
            i.map(|i| format!("{}:{}", self.list.hosts[i].0, self.list.hosts[i].1))
        };
        match to {
            Some(_) => {
                self.switches.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("botbox_database_primary_switches_total").increment(1);
                tracing::warn!(
                    host = name(to),
                    before = name(was),
                    "database primary in use"
                );
            }
            None => tracing::error!(
                host = name(was),
                "database primary lost: looking for the new one"
            ),
        }
        for (i, (h, p)) in self.list.hosts.iter().enumerate() {
            let v = if Some(i) == to { 1.0 } else { 0.0 };
            metrics::gauge!("botbox_database_primary", "host" => format!("{h}:{p}")).set(v);
        }
        self.current.send_replace(to);
    }
}

/// Whether the host at `url` answers and accepts writes.
async fn writable(url: &str) -> bool {
    use sqlx::Connection;
    let probe = async {
        let mut c = sqlx::postgres::PgConnection::connect(url).await.ok()?;
        let ro: (String,) = sqlx::query_as("SHOW transaction_read_only")
            .fetch_one(&mut c)
            .await
            .ok()?;
        let _ = c.close().await;
        Some(ro.0 == "off")
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, probe).await,
        Ok(Some(true))
    )
}

/// Keeps `current` true: checks the primary every [`CHECK_EVERY`]; without one, tries the
/// hosts in order, pausing longer after each round that found none.
async fn supervise(primary: std::sync::Weak<Primary>) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(p) = primary.upgrade() else { return };
        let current = *p.current.borrow();
        match current {
            Some(i) => {
                let (h, port) = &p.list.hosts[i];
                if !writable(&p.list.url_for(h, *port)).await {
                    p.set(None);
                    continue;
                }
                drop(p);
                tokio::time::sleep(CHECK_EVERY).await;
            }
            None => {
                let urls: Vec<String> = p
                    .list
                    .hosts
                    .iter()
                    .map(|(h, port)| p.list.url_for(h, *port))
                    .collect();
                drop(p);
                let mut found = None;
                for (i, url) in urls.iter().enumerate() {
                    if writable(url).await {
                        found = Some(i);
                        break;
                    }
                }
                let Some(p) = primary.upgrade() else { return };
                match found {
                    Some(i) => {
                        p.set(Some(i));
                        pause = Duration::from_millis(100);
                    }
                    None => {
                        drop(p);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(BACKOFF_MAX);
                    }
                }
            }
        }
    }
}

/// Accepts this process's database connections and passes each on to the primary.
async fn forward(primary: std::sync::Weak<Primary>, listener: TcpListener) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let Some(p) = primary.upgrade() else { return };
        tokio::spawn(pass_on(p, client));
    }
}

/// One connection: to the primary of the moment, cut when the primary changes.
async fn pass_on(p: Arc<Primary>, mut client: TcpStream) {
    let mut rx = p.current.subscribe();
    let deadline = tokio::time::Instant::now() + CONNECT_WAIT;
    let (i, mut upstream) = loop {
        let Ok(Ok(i)) = tokio::time::timeout_at(deadline, rx.wait_for(Option::is_some))
            .await
            .map(|r| r.map(|v| v.unwrap()))
        else {
            return; // no primary in time: the client sees its connection close
        };
        let (h, port) = p.list.hosts[i].clone();
        match tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect((h.as_str(), port))).await {
            Ok(Ok(s)) => break (i, s),
            _ => {
                if *p.current.borrow() == Some(i) {
                    p.set(None);
                }
                if tokio::time::Instant::now() >= deadline {
                    return;
                }
            }
        }
    };
    let _ = upstream.set_nodelay(true);
    let _ = client.set_nodelay(true);
    drop(p);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        _ = rx.wait_for(|c| *c != Some(i)) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn several(spec: &str) -> HostList {
        match parse(spec).unwrap() {
            Target::Several(l) => l,
            one => panic!("{one:?}"),
        }
    }

    #[test]
    fn a_url_lists_hosts_and_keeps_the_rest() {
        let l = several(
            "postgres://bot:s3cret@h1:5432,h2:5433,[::1]/botbox?target_session_attrs=read-write&sslmode=require",
        );
        assert_eq!(
            l.hosts,
            [
                ("h1".into(), 5432),
                ("h2".into(), 5433),
                ("::1".into(), 5432)
            ]
        );
        assert_eq!(
            l.url_for("127.0.0.1", 40000),
            "postgres://bot:s3cret@127.0.0.1:40000/botbox?sslmode=require"
        );
        assert_eq!(
            l.url_for("::1", 5432),
            "postgres://bot:s3cret@[::1]:5432/botbox?sslmode=require"
        );
    }

    #[test]
    fn the_keyword_form_reads_as_libpq_does() {
        let l = several(
            "host=h1,h2 port=5432,5433 dbname=botbox user=bot password='p w' target_session_attrs=primary",
        );
        assert_eq!(l.hosts, [("h1".into(), 5432), ("h2".into(), 5433)]);
        assert_eq!(l.url_for("h2", 5433), "postgres://bot:p%20w@h2:5433/botbox");
        // One port serves every host.
        let l = several("host=a,b port=6000 dbname=d");
        assert_eq!(l.hosts, [("a".into(), 6000), ("b".into(), 6000)]);
    }

    #[test]
    fn one_host_is_a_plain_url() {
        let socket = "postgres:///botbox?host=/var/run/postgresql";
        assert_eq!(parse(socket).unwrap(), Target::One(socket.into()));
        assert_eq!(
            parse("postgres://postgres@127.0.0.1:5432/test").unwrap(),
            Target::One("postgres://postgres@127.0.0.1:5432/test".into())
        );
        assert_eq!(
            parse("host=db dbname=botbox user=bot").unwrap(),
            Target::One("postgres://bot@db:5432/botbox".into())
        );
    }

    #[test]
    fn what_cannot_be_served_is_refused_with_the_reason() {
        let e = parse("postgres://h1,h2/db?target_session_attrs=read-only").unwrap_err();
        assert!(e.contains("needs the primary"), "{e}");
        let e = parse("host=a,b,c port=1,2 dbname=d").unwrap_err();
        assert!(e.contains("3 hosts but 2 ports"), "{e}");
        let e = parse("postgres://h1:x,h2/db").unwrap_err();
        assert!(e.contains("not a number"), "{e}");
        let e = parse("postgres://h1,,h2/db").unwrap_err();
        assert!(e.contains("empty host"), "{e}");
    }
}
