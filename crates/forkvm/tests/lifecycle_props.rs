//! Property test: any sequence of calls and resets on a fork behaves like a
//! model in which reset returns to the master's state.

mod common;

use forkvm::machine::{Arg, Config, ReadyAt};
use forkvm::master::Master;
use proptest::prelude::*;
use std::sync::OnceLock;

#[derive(Debug, Clone)]
enum Op {
    Bump,
    Write(u64),
    Marks,
    Reset,
    Refork,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Bump),
        3 => (0u64..40).prop_map(Op::Write),
        2 => Just(Op::Marks),
        2 => Just(Op::Reset),
        1 => Just(Op::Refork),
    ]
}

fn master() -> &'static Master {
    static M: OnceLock<Master> = OnceLock::new();
    M.get_or_init(|| {
        let path = common::api_guest("api_demo");
        let config = Config {
            memory: 32 << 20,
            ..Config::default()
        };
        Master::load(path.to_str().unwrap(), config, &ReadyAt::Call).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn fork_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        let m = master();
        let digest = m.digest();
        let mut f = m.fork().unwrap();
        let (mut counter, mut max_written) = (0u64, 0u64);
        for op in ops {
            match op {
                Op::Bump => {
                    counter += 1;
                    prop_assert_eq!(f.vmcall("bump", &[]).unwrap(), counter);
                }
                Op::Write(n) => {
                    prop_assert_eq!(f.vmcall("write_pages", &[Arg::Int(n)]).unwrap(), n);
                    max_written = max_written.max(n);
                }
                Op::Marks => {
                    let want = max_written * (max_written + 1) / 2;
                    prop_assert_eq!(f.vmcall("page_marks", &[]).unwrap(), want);
                }
                Op::Reset => {
                    f.reset().unwrap();
                    counter = 0;
                    max_written = 0;
                }
                Op::Refork => {
                    f = m.fork().unwrap();
                    counter = 0;
                    max_written = 0;
                }
            }
        }
        prop_assert_eq!(m.digest(), digest);
    }
}
