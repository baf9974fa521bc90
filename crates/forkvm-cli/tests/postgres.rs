//! PostgreSQL, unmodified, inside one `forkvm run`: initdb, the server
//! (a process per connection, SysV and MAP_SHARED shared memory, latches
//! woken by signals read from a signalfd), psql queries and pgbench, then
//! pg_ctl stop. Skipped when PostgreSQL is not installed.
//!
//! The expected query results are what the same script prints natively
//! (run as the `postgres` user, since initdb refuses root).

mod common;

use common::Case;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where Debian keeps each installed version's programs.
const POSTGRES_ROOT: &str = "/usr/lib/postgresql";

/// The newest installed version's bin directory, if any.
fn postgres_bin() -> Option<PathBuf> {
    let mut bins: Vec<PathBuf> = std::fs::read_dir(POSTGRES_ROOT)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("postgres").is_file() && b.join("pgbench").is_file())
        .collect();
    bins.sort();
    bins.pop()
}

/// initdb, the server on a UNIX socket in the scratch directory, queries
/// (a table, aggregates, a transaction with a savepoint, one rolled back),
/// an update waiting for another session's row lock (that session commits
/// once it sees the wait; the waiter is woken by the commit's SIGURG, the
/// deadlock timer, which also wakes it, being set past the run's timeout), pgbench's tables and 50 transactions, the server stopped.
/// $1: the bin directory, $2: the scratch directory.
const SCRIPT: &str = r#"
set -u
B=$1; D=$2
mkdir -p "$D/sock"
$B/initdb -D "$D/data" --no-sync -A trust -U pg >"$D/initdb.log" 2>&1 || { echo "initdb failed"; cat "$D/initdb.log"; exit 1; }
$B/pg_ctl -D "$D/data" -l "$D/server.log" -w -t 30 -o "-k $D/sock -c listen_addresses='' -c fsync=off -c shared_buffers=16MB -c max_connections=10 -c autovacuum=off -c deadlock_timeout=100s" start >"$D/pg_ctl.log" 2>&1 || { echo "start failed"; cat "$D/pg_ctl.log" "$D/server.log"; exit 1; }
echo started
P="$B/psql -X -h $D/sock -U pg -d postgres -v ON_ERROR_STOP=1 -qAt"
$P <<'SQL'
CREATE TABLE t (id int PRIMARY KEY, name text, v numeric);
INSERT INTO t SELECT g, 'n' || g, g * 1.5 FROM generate_series(1, 1000) g;
SELECT count(*), sum(v), avg(id), min(name), max(name) FROM t;
SELECT id % 3 AS k, count(*), sum(id) FROM t GROUP BY k ORDER BY k;
BEGIN;
UPDATE t SET v = v + 1 WHERE id <= 10;
SAVEPOINT s;
DELETE FROM t WHERE id > 990;
ROLLBACK TO s;
COMMIT;
BEGIN;
DELETE FROM t;
ROLLBACK;
SELECT count(*), sum(v) FROM t;
SQL
$P -c "CREATE TABLE l (id int PRIMARY KEY, v int)" -c "INSERT INTO l VALUES (1, 0)"
$P <<SQL &
BEGIN;
UPDATE l SET v = v + 1 WHERE id = 1;
\! touch $D/locked
DO \$\$ BEGIN WHILE NOT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted) LOOP PERFORM pg_sleep(0.05); END LOOP; END \$\$;
COMMIT;
SQL
while [ ! -e "$D/locked" ]; do sleep 0.1; done
$P -c "UPDATE l SET v = v + 10 WHERE id = 1 RETURNING v"
wait
$B/pgbench -h "$D/sock" -U pg -i -s 1 -q postgres >"$D/pgbench_i.log" 2>&1 && echo "pgbench -i ok" || { echo "pgbench -i failed"; cat "$D/pgbench_i.log"; }
$B/pgbench -h "$D/sock" -U pg -c 1 -t 50 -n postgres >"$D/pgbench.log" 2>&1 && echo "pgbench ok" || { echo "pgbench failed"; cat "$D/pgbench.log"; }
grep -E "actually processed|number of failed" "$D/pgbench.log"
$P -c "SELECT count(*) FROM pgbench_history" -c "SELECT sum(abalance) = (SELECT sum(delta) FROM pgbench_history) FROM pgbench_accounts"
$B/pg_ctl -D "$D/data" -m fast -w -t 30 stop >>"$D/pg_ctl.log" 2>&1 && echo stopped || { echo "stop failed"; cat "$D/pg_ctl.log"; tail -20 "$D/server.log"; }
"#;

const EXPECTED: &str = "started
1000|750750.0|500.5000000000000000|n1|n999
0|333|166833
1|334|167167
2|333|166500
1000|750760.0
11
pgbench -i ok
pgbench ok
number of transactions actually processed: 50/50
number of failed transactions: 0 (0.000%)
50
t
stopped
";

/// PostgreSQL runs in forkvm as on Linux (initdb failed: shmget was ENOSYS;
/// then pgbench with two clients ran at about one transaction a second: a
/// backend waiting for a row lock missed the SIGURG that wakes its latch).
#[test]
fn postgres_serves_queries_and_pgbench() {
    let Some(bin) = postgres_bin() else {
        eprintln!("skipped: PostgreSQL is not installed under {POSTGRES_ROOT}");
        return;
    };
    let dir = common::scratch_dir("postgres");
    let d = dir.to_str().expect("utf-8 path");
    let b = bin.to_str().expect("utf-8 path");
    let run = Case::new("/bin/sh")
        .args(["-c", SCRIPT, "sh", b, d])
        .flags([
            "--memory",
            "1024",
            "--address-space",
            "8192",
            "--timeout",
            "100",
            "--allow-read",
            "/usr",
            "--allow-read",
            "/etc",
            "--allow-write",
            d,
            "--cwd",
            d,
            "--env",
            "PATH=/usr/bin:/bin",
            "--env",
            "LANG=C",
        ])
        .limit(Duration::from_secs(110))
        .run_forkvm();
    let server_log = std::fs::read_to_string(Path::new(d).join("server.log")).unwrap_or_default();
    assert_eq!(
        run.stdout_str(),
        EXPECTED,
        "{}\n--- server.log:\n{server_log}",
        run.describe()
    );
    assert_eq!(run.status, 0, "{}", run.describe());
}
