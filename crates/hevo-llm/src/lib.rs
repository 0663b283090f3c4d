//! hevo's model layer: every model call a harness makes goes through here.
//!
//! Backends sit behind one trait; the gateway serves OpenAI- and Anthropic-compatible HTTP on
//! loopback, attributes each call to a trial by its key, prices it from the price table,
//! enforces caps, caches deterministic responses and writes traces. Nothing here knows about
//! task suites or search; the engine owns those.
#![warn(missing_docs)]
