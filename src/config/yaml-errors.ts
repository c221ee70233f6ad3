/**
 * The YAML library's errors in plain words, with what to do; the library's own sentence
 * follows in brackets for a search. Codes: the `yaml` package's `ErrorCode`.
 */
const YAML_PLAIN: Record<string, string> = {
  BLOCK_IN_FLOW:
    'a list or map on lines of its own inside { } or [ ]: inside braces and brackets write everything on one line, separated by commas (or close the brace or bracket first; a missing } or ] often causes this)',
  TAB_AS_INDENT: 'a tab indents this line: YAML indents with spaces only',
  BAD_INDENT:
    'the indentation does not line up: the keys of one map start in the same column, list items (-) too',
  MISSING_CHAR: 'something is not closed: a quote, a brace } or a bracket ] is missing',
  MULTILINE_IMPLICIT_KEY:
    'a key runs over more than one line: often a missing colon after a key, or a quote opened on the line before and never closed',
  UNEXPECTED_TOKEN:
    'unexpected text here: often a missing colon after a key, a missing comma inside { } or [ ], or text after a closing quote',
  BLOCK_AS_IMPLICIT_KEY:
    'a list or map stands where a key should be: often a missing space after a colon, or a line indented too far',
  BAD_SCALAR_START:
    'a value cannot start with this character unquoted (@, `, %, | or >): put the value in quotes',
  BAD_DQ_ESCAPE:
    'an unknown backslash escape in "double quotes": write \\\\ for one backslash, or use \'single quotes\' (no escapes)',
  MULTIPLE_DOCS: 'the file holds more than one YAML document (a --- line in the middle): keep one',
  KEY_OVER_1024_CHARS:
    'a key longer than 1024 characters: often a missing colon or a quote that is never closed',
  DUPLICATE_KEY: 'a key is written twice in the same map: keep one',
  BAD_ALIAS: 'an alias (*name) that is not written correctly',
  MULTIPLE_ANCHORS: 'two anchors (&name) on one value: keep one',
  MULTIPLE_TAGS: 'two tags (!tag) on one value: keep one',
  NON_STRING_KEY: 'a key that is not text: keys are names',
};

/** A YAML parse error in plain words, with the line's text when it helps to find the place. */
export function yamlMessage(
  code: string,
  message: string,
  text: string,
  offset: number | undefined,
): string {
  const first = message.split('\n')[0] ?? message;
  const unclosed = /end with an? ([}\]])/.exec(first);
  const plain = unclosed
    ? `a ${unclosed[1] === '}' ? '{' : '['} opened on this or an earlier line is not closed with ${unclosed[1]} (or the lines inside it are not indented under its key)`
    : YAML_PLAIN[code];
  if (!plain) return first;
  const lineText =
    offset === undefined
      ? undefined
      : text
          .slice(text.lastIndexOf('\n', offset - 1) + 1)
          .split('\n')[0]
          ?.trim();
  const shown = lineText
    ? `; at \`${lineText.length > 60 ? `${lineText.slice(0, 57)}...` : lineText}\``
    : '';
  return `${plain}${shown} [YAML: ${first}]`;
}
