//! Where records go: a thread of its own streams them to the history file through
//! [`jsonl::Writer`] (one unbuffered write per record, so the file holds every record
//! written so far even if the run dies) and keeps the in-memory [`History`].

use model::history::WalLog;
use model::history::{jsonl, ValidationError};
use model::{History, NemesisRecord, OpRecord, TxnRecord};
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Why the history could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot write the history file {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A recorder bug: the records break a rule of specs/HISTORY.md.
    #[error("the recorded history breaks a rule of the format (a recorder bug): {0}")]
    Invalid(#[from] ValidationError),
    #[error("the history was already finished")]
    Finished,
    #[error("the history writer thread stopped unexpectedly")]
    WriterGone,
}

enum Record {
    Op(OpRecord),
    Txn(TxnRecord),
    Nemesis(NemesisRecord),
    Wal(WalLog),
}

/// The sending end of the writer thread.
pub(super) struct Store {
    records: mpsc::Sender<Record>,
    thread: JoinHandle<Result<History, RecordError>>,
}

/// The file a history streams to, and where it is.
struct Sink {
    writer: jsonl::Writer<File>,
    path: PathBuf,
}

impl Store {
    /// Writes the header (when there is a file) and starts the writer thread.
    pub(super) fn open(
        path: Option<PathBuf>,
        meta: BTreeMap<String, serde_json::Value>,
    ) -> Result<Store, RecordError> {
        let sink = match path {
            Some(path) => Some(Sink::create(path, &meta)?),
            None => None,
        };
        let history = History {
            meta,
            ..History::default()
        };
        let (records, incoming) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || keep(incoming, history, sink))
            .map_err(|source| RecordError::Write {
                path: PathBuf::from("<writer thread>"),
                source,
            })?;
        Ok(Store { records, thread })
    }

    pub(super) fn op(&self, op: OpRecord) -> Result<(), RecordError> {
        self.send(Record::Op(op))
    }

    pub(super) fn txn(&self, txn: TxnRecord) -> Result<(), RecordError> {
        self.send(Record::Txn(txn))
    }

    pub(super) fn nemesis(&self, nemesis: NemesisRecord) -> Result<(), RecordError> {
        self.send(Record::Nemesis(nemesis))
    }

    pub(super) fn wal(&self, wal: WalLog) -> Result<(), RecordError> {
        self.send(Record::Wal(wal))
    }

    fn send(&self, record: Record) -> Result<(), RecordError> {
        self.records
            .send(record)
            .map_err(|_| RecordError::WriterGone)
    }

    /// Waits for every record to be written; the history, once it passed validation.
    pub(super) fn finish(self) -> Result<History, RecordError> {
        drop(self.records);
        let history = self.thread.join().map_err(|_| RecordError::WriterGone)??;
        model::history::validate(&history)?;
        Ok(history)
    }
}

impl Sink {
    fn create(
        path: PathBuf,
        meta: &BTreeMap<String, serde_json::Value>,
    ) -> Result<Sink, RecordError> {
        let failed = |source| RecordError::Write {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let file = File::create(&path).map_err(failed)?;
        let writer = jsonl::Writer::new(file, meta).map_err(failed)?;
        Ok(Sink { writer, path })
    }

    fn write(&mut self, record: &Record) -> io::Result<()> {
        match record {
            Record::Op(op) => self.writer.write_op(op),
            Record::Txn(txn) => self.writer.write_txn(txn),
            Record::Nemesis(n) => self.writer.write_nemesis(n),
            Record::Wal(w) => self.writer.write_wal(w),
        }
    }
}

/// The writer thread: every record into the history, and into the file while it takes
/// them (the first write error is reported at the end; recording goes on in memory).
fn keep(
    incoming: mpsc::Receiver<Record>,
    mut history: History,
    mut sink: Option<Sink>,
) -> Result<History, RecordError> {
    let mut failure = None;
    for record in incoming {
        if let Some(s) = sink.as_mut() {
            if let Err(source) = s.write(&record) {
                failure = Some(RecordError::Write {
                    path: s.path.clone(),
                    source,
                });
                sink = None;
            }
        }
        match record {
            Record::Op(op) => history.ops.push(op),
            Record::Txn(txn) => history.txns.push(txn),
            Record::Nemesis(n) => history.nemeses.push(n),
            Record::Wal(w) => history.wal = Some(w),
        }
    }
    if let Some(mut s) = sink {
        if let Err(source) = s.writer.flush() {
            failure.get_or_insert(RecordError::Write {
                path: s.path.clone(),
                source,
            });
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(history),
    }
}
