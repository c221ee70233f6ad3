import { ErrorCodes, GatewayError } from '../../errors.js';
/**
 * A streaming CSV tokenizer (RFC 4180 quoting; records end at CRLF, LF or a lone CR) that, unlike
 * a general-purpose parser, keeps going after a row with broken quoting: that row is handed over
 * as {@link CsvRecordSink.broken} with its line number and text, and the next line starts a new
 * record. Text is latin1 (one character per byte), so bytes survive unchanged.
 */
const QUOTE = 0x22;
const CR = 0x0d;
const LF = 0x0a;
const FIELD_START: State = 0;
const UNQUOTED: State = 1;
const QUOTED: State = 2;
/** A quote inside a quoted field: a doubled quote follows, or the field ends. */
const QUOTE_IN_QUOTED: State = 3;
/** After broken quoting: the rest of the line belongs to the broken row. */
const SKIP_LINE: State = 4;

/** Where a row's quoting broke: the 1-based column, and the character found after a closing quote. */
export interface CsvProblem {
  column: number;
  found: string;
}

/** What the tokenizer hands over, in file order. */
export interface CsvRecordSink {
  /** A record's fields (latin1 text, quotes of quoted fields removed) and its first line. */
  record(fields: string[], line: number): void;
  /** A row with broken quoting: its text up to the end of its line, its first line, and the fault. */
  broken(raw: string, line: number, problem: CsvProblem): void;
}

type State = 0 | 1 | 2 | 3 | 4;

/** The file cannot be split into records at all (a quote never closed, a record over the limit). */
export class CsvSyntaxError extends GatewayError {
  constructor(message: string) {
    super(ErrorCodes.INPUT, message);
    this.name = 'CsvSyntaxError';
  }
}

export class CsvTokenizer {
  private readonly delimiter: string;
  private readonly d0: number;
  private state: State = FIELD_START;
  private fields: string[] = [];
  /** The current field's text taken so far (from earlier chunks or before a doubled quote). */
  private value = '';
  /** The current record's text from earlier chunks (for a broken row's raw and the size limit). */
  private carry = '';
  /** The end of the last chunk when it may hold the start of a multi-character delimiter. */
  private held = '';
  private line: number;
  private recordLine: number;
  private quoteLine = 0;
  private afterCr = false;
  private problem: CsvProblem = { column: 0, found: '' };
  /**
   * @param delimiter the field delimiter as latin1 text (a UTF-8 delimiter may be several characters)
   * @param maxRecordChars longest record taken; longer throws {@link CsvSyntaxError}
   * @param firstLine number of the first line of the text
   */
  constructor(
    delimiter: string,
    private readonly sink: CsvRecordSink,
    private readonly maxRecordChars: number,
    firstLine = 1,
  ) {
    this.delimiter = delimiter;
    this.d0 = delimiter.charCodeAt(0);
    this.line = firstLine;
    this.recordLine = firstLine;
  }
  /** Tokenizes a chunk; records completed in it are handed to the sink before this returns. */
  push(chunk: string): void {
    this.run(this.held + chunk, false);
  }
  /** The text ended: hands over the last record. @throws CsvSyntaxError for a quote never closed. */
  end(): void {
    this.run(this.held, true);
    this.held = '';
    switch (this.state) {
      case QUOTED:
        throw new CsvSyntaxError(
          `Quote Not Closed: the quoted field opened at line ${this.quoteLine} is never closed (a quote inside a field must be doubled: "")`,
        );
      case UNQUOTED:
        this.fields.push(this.value);
        this.endRecord(this.carry.length);
        break;
      case QUOTE_IN_QUOTED:
        this.fields.push(this.value);
        this.endRecord(this.carry.length);
        break;
      case SKIP_LINE:
        this.sink.broken(this.carry, this.recordLine, this.problem);
        break;
      case FIELD_START:
        if (this.fields.length > 0) {
          this.fields.push('');
          this.endRecord(this.carry.length);
        }
        break;
    }
  }
  private run(text: string, final: boolean): void {
    const dl = this.delimiter.length;
    const limit = final || dl === 1 ? text.length : Math.max(0, text.length - (dl - 1));
    let recordStart = 0;
    let segStart = 0;
    let i = 0;
    if (this.afterCr && limit > 0) {
      this.afterCr = false;
      if (text.charCodeAt(0) === LF) {
        // The LF of a CRLF split across chunks: no new line.
        i = 1;
        if (this.state === FIELD_START && this.fields.length === 0) recordStart = 1;
      }
    }
    const isDelimiterAt = (at: number): boolean => dl === 1 || text.startsWith(this.delimiter, at);
    for (; i < limit; i++) {
      const c = text.charCodeAt(i);
      switch (this.state) {
        case FIELD_START:
          if (c === QUOTE) {
            this.state = QUOTED;
            this.quoteLine = this.line;
            this.value = '';
            segStart = i + 1;
          } else if (c === this.d0 && isDelimiterAt(i)) {
            this.fields.push('');
            i += dl - 1;
          } else if (c === CR || c === LF) {
            this.fields.push('');
            this.checkSize(recordStart, i);
            this.endRecord(i - recordStart);
            i = this.lineBreak(text, i, limit);
            recordStart = i + 1;
          } else {
            this.state = UNQUOTED;
            this.value = '';
            segStart = i;
          }
          break;
        case UNQUOTED:
          if (c === this.d0 && isDelimiterAt(i)) {
            this.fields.push(this.value + text.slice(segStart, i));
            this.value = '';
            this.state = FIELD_START;
            i += dl - 1;
          } else if (c === CR || c === LF) {
            this.fields.push(this.value + text.slice(segStart, i));
            this.value = '';
            this.checkSize(recordStart, i);
            this.endRecord(i - recordStart);
            i = this.lineBreak(text, i, limit);
            recordStart = i + 1;
          }
          // Anything else, a quote too, is data of an unquoted field.
          break;
        case QUOTED:
          if (c === QUOTE) {
            this.value += text.slice(segStart, i);
            this.state = QUOTE_IN_QUOTED;
          } else if (c === CR) {
            this.line += 1;
            if (i + 1 < limit && text.charCodeAt(i + 1) === LF) i += 1;
            else if (i + 1 >= limit) this.afterCr = true;
          } else if (c === LF) {
            this.line += 1;
          }
          break;
        case QUOTE_IN_QUOTED:
          if (c === QUOTE) {
            // A doubled quote: one quote of data, the field goes on.
            this.state = QUOTED;
            segStart = i;
          } else if (c === this.d0 && isDelimiterAt(i)) {
            this.fields.push(this.value);
            this.value = '';
            this.state = FIELD_START;
            i += dl - 1;
          } else if (c === CR || c === LF) {
            this.fields.push(this.value);
            this.value = '';
            this.checkSize(recordStart, i);
            this.endRecord(i - recordStart);
            i = this.lineBreak(text, i, limit);
            recordStart = i + 1;
          } else {
            this.problem = { column: this.fields.length + 1, found: text[i]! };
            this.state = SKIP_LINE;
          }
          break;
        case SKIP_LINE:
          if (c === CR || c === LF) {
            this.checkSize(recordStart, i);
            this.sink.broken(
              this.carry + text.slice(recordStart, i),
              this.recordLine,
              this.problem,
            );
            this.carry = '';
            this.fields = [];
            this.value = '';
            this.state = FIELD_START;
            i = this.lineBreak(text, i, limit);
            this.recordLine = this.line;
            recordStart = i + 1;
          }
          break;
      }
    }
    // The chunk ends inside a record: keep what the next chunk continues.
    if (this.state === UNQUOTED || this.state === QUOTED) this.value += text.slice(segStart, limit);
    if (recordStart < limit) this.carry += text.slice(recordStart, limit);
    this.held = text.slice(limit);
    if (this.carry.length > this.maxRecordChars) this.tooLong();
  }
  /** Counts a line break at `i` (CR, LF or CRLF) and returns the index of its last character. */
  private lineBreak(text: string, i: number, limit: number): number {
    this.line += 1;
    this.recordLine = this.line;
    if (text.charCodeAt(i) !== CR) return i;
    if (i + 1 < limit) return text.charCodeAt(i + 1) === LF ? i + 1 : i;
    this.afterCr = true;
    return i;
  }
  private endRecord(length: number): void {
    if (this.carry.length + length > this.maxRecordChars) this.tooLong();
    const fields = this.fields;
    const line = this.recordLine;
    this.fields = [];
    this.carry = '';
    this.state = FIELD_START;
    this.sink.record(fields, line);
  }
  private checkSize(recordStart: number, i: number): void {
    if (this.carry.length + (i - recordStart) > this.maxRecordChars) this.tooLong();
  }
  private tooLong(): never {
    throw new CsvSyntaxError(
      `the record starting at line ${this.recordLine} is longer than ${this.maxRecordChars} bytes (a quote never closed, or not a CSV file)`,
    );
  }
}
