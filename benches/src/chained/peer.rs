//! The original SlabHash's results (`--peer-csv`, the peers' `slab_bench` CSV), shown beside ours in `bulk`
//! and `incremental`.

/// One SlabHash table of the peer's bulk benchmark (`chain<load>_util<u>`): its rates in G keys/s.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerTable {
    pub table: String,
    /// Memory utilisation SlabHash reports for the table.
    pub util: f64,
    pub build: Option<f64>,
    pub find100: Option<f64>,
    pub find0: Option<f64>,
    /// Every row of the table said `ok`.
    pub ok: bool,
}

/// The original SlabHash's results, from the peers' `slab_bench` CSV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Peer {
    /// Keys of the peer's run, as a power of two (`None`: no rows).
    pub log2_keys: Option<u32>,
    /// Bulk tables in file order.
    pub bulk: Vec<PeerTable>,
    /// Incremental inserts: (log2 batch size, G keys/s, ok).
    pub incremental: Vec<(u32, f64, bool)>,
}

impl Peer {
    /// Reads and parses the peer CSV at `path`.
    pub fn read(path: &str) -> Result<Peer, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--peer-csv {path}: {e}"))?;
        Peer::parse(&text).map_err(|(line, why)| format!("--peer-csv {path}, line {line}: {why}"))
    }

    /// Parses rows `slabhash,<table>,<slots>,<log2 keys>,<util>,<op>,<G keys/s>,<ok|WRONG>` (blank lines and
    /// `#` comments skipped); ops `build`, `find100`, `find0` of bulk tables, `insert` of
    /// `incremental_batch2^K`. Errors carry the 1-based line number.
    fn parse(text: &str) -> Result<Peer, (usize, String)> {
        let mut p = Peer::default();
        for (i, line) in text.lines().enumerate() {
            let err = |why: String| (i + 1, why);
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() != 8 || f[0] != "slabhash" {
                return Err(err(format!(
                    "expected 8 fields `slabhash,<table>,<slots>,<log2 keys>,<util>,<op>,<G keys/s>,<ok|WRONG>`, got `{line}`"
                )));
            }
            let num = |what: &str, s: &str| {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| err(format!("{what} `{s}` is not a number")))
            };
            let log2: u32 = f[3]
                .parse()
                .map_err(|_| err(format!("log2 keys `{}` is not an integer", f[3])))?;
            let (util, gkeys) = (num("utilisation", f[4])?, num("rate", f[6])?);
            let ok = match f[7] {
                "ok" => true,
                "WRONG" => false,
                other => return Err(err(format!("check `{other}` is neither ok nor WRONG"))),
            };
            p.log2_keys = Some(log2);
            if f[5] == "insert" {
                let batch = f[1]
                    .strip_prefix("incremental_batch2^")
                    .and_then(|b| b.parse::<u32>().ok())
                    .ok_or_else(|| {
                        err(format!(
                            "an insert row's table `{}` is not incremental_batch2^K",
                            f[1]
                        ))
                    })?;
                p.incremental.push((batch, gkeys, ok));
                continue;
            }
            let at = match p.bulk.iter().position(|t| t.table == f[1]) {
                Some(at) => at,
                None => {
                    p.bulk.push(PeerTable {
                        table: f[1].to_string(),
                        util,
                        build: None,
                        find100: None,
                        find0: None,
                        ok: true,
                    });
                    p.bulk.len() - 1
                }
            };
            let t = &mut p.bulk[at];
            t.ok &= ok;
            let slot = match f[5] {
                "build" => &mut t.build,
                "find100" => &mut t.find100,
                "find0" => &mut t.find0,
                other => {
                    return Err(err(format!(
                        "op `{other}` is none of build, find100, find0, insert"
                    )));
                }
            };
            *slot = Some(gkeys);
        }
        Ok(p)
    }

    /// The bulk table whose utilisation is nearest `util`.
    pub fn nearest(&self, util: f64) -> Option<&PeerTable> {
        self.bulk
            .iter()
            .min_by(|a, b| (a.util - util).abs().total_cmp(&(b.util - util).abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_csv_parses_and_reports_bad_lines() {
        let p = Peer::parse(
            "slabhash,chain0.6_util0.55,15,24,0.55,build,8.885,ok\n\
             slabhash,chain0.6_util0.55,15,24,0.55,find100,14.299,ok\n\
             \n\
             slabhash,chain1.0_util0.65,15,24,0.65,find0,10.020,WRONG\n\
             slabhash,incremental_batch2^15,15,24,0,insert,0.976,ok\n",
        )
        .unwrap();
        assert_eq!(p.log2_keys, Some(24));
        assert_eq!(p.bulk.len(), 2);
        assert_eq!(
            (p.bulk[0].build, p.bulk[0].find100, p.bulk[0].find0),
            (Some(8.885), Some(14.299), None)
        );
        assert!(p.bulk[0].ok && !p.bulk[1].ok);
        assert_eq!(p.incremental, vec![(15, 0.976, true)]);
        assert_eq!(p.nearest(0.6).unwrap().table, "chain0.6_util0.55");
        let line = |t: &str| Peer::parse(t).unwrap_err().0;
        assert_eq!(line("\nslabhash,a,15,24,0.5,build,x,ok"), 2);
        assert_eq!(line("slabhash,a,15,24,0.5,scan,1,ok"), 1);
        assert_eq!(line("slabhash,a,15,24,0.5,build,1,maybe"), 1);
        assert_eq!(line("slabhash,incremental_batch,15,24,0,insert,1,ok"), 1);
        assert_eq!(line("cuco,a,15,24,0.5,build,1,ok"), 1);
    }
}
