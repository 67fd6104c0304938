//! `iwarp decode`: a capture decoder for iWARP traffic.
//!
//! The decoding is the `iwarp_decode` library's: capture reading, TCP
//! reassembly, MPA/IFT framing, DDP and RDMAP, stateful checks and whole
//! operations, as typed records. This module keeps what makes it a
//! command: the arguments ([`args`]) and the text and JSON rendering
//! ([`format`](mod@format)), like `tshark`'s one line per PDU with `-v`
//! field trees, or one line per operation with `--ops`.

pub mod args;
pub mod format;

use std::io::{self, BufWriter};
use std::process::ExitCode;

use iwarp_decode::{CaptureError, CaptureReader, Decoder, Options, Summary};

use args::DecodeArgs;
use format::{Json, Output, Text};

/// Decodes every frame `reader` gives, writing to `out`; returns the
/// summary, and why the capture ended early if it did.
pub fn decode(
    mut reader: CaptureReader,
    opts: Options,
    out: &mut dyn Output,
) -> io::Result<(Summary, Option<CaptureError>)> {
    let mut decoder = Decoder::new(opts);
    let mut capture_error = None;
    while let Some(next) = reader.next_frame() {
        match next {
            Ok(frame) => {
                for record in decoder.frame(&frame) {
                    out.record(&record)?;
                }
            }
            Err(e) => capture_error = Some(e),
        }
    }
    let (records, summary) = decoder.finish();
    for record in &records {
        out.record(record)?;
    }
    let unread = capture_error
        .as_ref()
        .map(|e| format!("unreadable after frame {}: {e}", reader.frames_read()));
    out.summary(&summary, unread.as_deref())?;
    Ok((summary, capture_error))
}

/// Runs `iwarp decode` and turns the outcome into an exit code: 0 when the
/// capture was read (whatever errors the traffic holds), 1 when it could
/// not be.
pub fn run(args: DecodeArgs) -> ExitCode {
    let reader = match CaptureReader::open(&args.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("iwarp decode: {}: {e}", args.file.display());
            return ExitCode::FAILURE;
        }
    };
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    let opts = args.options();
    let result = if args.json {
        decode(reader, opts, &mut Json::new(&mut w))
    } else {
        decode(reader, opts, &mut Text::new(&mut w, args.verbose, args.ops))
    };
    match result {
        Ok((_, capture_error)) => {
            if let Some(e) = capture_error {
                eprintln!("iwarp decode: warning: {}: {e}", args.file.display());
            }
            ExitCode::SUCCESS
        }
        // The reader went away (`| head`): not a failure of ours.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp decode: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}
