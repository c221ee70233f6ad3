import { ErrorCodes } from '../errors.js';
import type { CatalogueEntry } from '../error-catalogue.js';

/**
 * The `SCANGW_E_…` entries of the catalogue (see src/error-catalogue.ts): errors the gateway raises
 * (`GatewayError.code`), in the order of `docs/errors.md`.
 */
export const ERROR_ENTRIES: readonly CatalogueEntry[] = [
  {
    code: ErrorCodes.CONFIG,
    meaning:
      "the configuration file is missing, not YAML, or invalid; also an `http` input's ingest token (where it can be read) shorter than 16 characters; on the page: a reload was refused and the previous configuration still runs",
    whatToDo:
      'run `scan-gateway config check`; each problem names file, line and key (for a short token: the input and where the token came from, never its value)',
  },
  {
    code: ErrorCodes.SECRET,
    meaning:
      'the client secret could not be read; or the admin, read or ingest token is missing where required, unreadable, or shorter than 16 characters',
    whatToDo:
      'set `SCAN_GATEWAY_CLIENT_SECRET`, the credential `client-secret`, or `upstream.clientSecretFile`; for a token, make one with `openssl rand -hex 32`',
  },
  {
    code: ErrorCodes.UPSTREAM_NETWORK,
    meaning: 'the service could not be reached (DNS, connect, reset, timeout)',
    whatToDo:
      'check the network and proxy; delivery retries by itself, and scans wait safely in the buffer meanwhile',
  },
  {
    code: ErrorCodes.UPSTREAM_HTTP,
    meaning: 'the service answered an HTTP error',
    whatToDo: '408/429/5xx are retried; other 4xx hold the batch (see failures)',
  },
  {
    code: ErrorCodes.SFTP_NETWORK,
    meaning:
      'the SFTP server (`upstream.sftp.host`) could not be reached, or the connection broke during a transfer',
    whatToDo:
      'check the network and that the firewall lets SSH (port `upstream.sftp.port`) out; delivery retries by itself, and a half-written `.part` file is removed and written again',
  },
  {
    code: ErrorCodes.SFTP_HOST_KEY,
    meaning:
      'the SFTP server showed a host key whose SHA256 fingerprint is not `upstream.sftp.hostKey`; nothing was sent (no trust on first use)',
    whatToDo:
      "ask the service operator for the server's fingerprint (`ssh-keygen -lf` of its public host key) and compare; set `upstream.sftp.hostKey` only to a fingerprint confirmed out of band",
  },
  {
    code: ErrorCodes.SFTP_AUTH,
    meaning: "the SFTP server refused the gateway's user name, key or password",
    whatToDo:
      'check `upstream.sftp.username`, `upstream.sftp.privateKeyFile` (or the password in SCAN_GATEWAY_SFTP_PASSWORD / `upstream.sftp.passwordFile`) with the service operator; delivery retries',
  },
  {
    code: ErrorCodes.SFTP_PERMISSION,
    meaning:
      'the SFTP server refused to write or rename a file in `upstream.sftp.remoteDir` (permission denied); the batch is held with the reason',
    whatToDo:
      "ask the service operator to let the gateway's user write to the folder, or correct `upstream.sftp.remoteDir`; then `scan-gateway replay --batch N`",
  },
  {
    code: ErrorCodes.SFTP_DISK_FULL,
    meaning: 'the SFTP server reported its disk or quota full; the partial file was removed',
    whatToDo:
      'tell the service operator; delivery retries with backoff and scans wait in the buffer',
  },
  {
    code: ErrorCodes.SFTP_CONFLICT,
    meaning:
      'the remote file named for a batch already exists with a different size: someone else wrote it; it is never overwritten and the batch is held',
    whatToDo:
      'compare the remote file with the batch (`scan-gateway failures --batch N`); check that no two gateways share `site.id` and `upstream.sftp.remoteDir`',
  },
  {
    code: ErrorCodes.SFTP,
    meaning:
      'another SFTP failure: an unexpected server status, or a written file whose size did not match',
    whatToDo:
      'delivery retries; if it persists, report it with the log line to the service operator',
  },
  {
    code: ErrorCodes.UPSTREAM_AUTH,
    meaning: 'the token request was refused, or a 401 persisted after a fresh token',
    whatToDo: 'check `upstream.clientId` and the secret',
  },
  {
    code: ErrorCodes.UPSTREAM_RESPONSE,
    meaning: "the answer did not have the contract's shape",
    whatToDo: 'report it with the log line; delivery retries',
  },
  {
    code: ErrorCodes.UPSTREAM_TOKEN,
    meaning:
      'the token endpoint answered 2xx with no usable token (not JSON, no `access_token`/`accessToken`, a token type other than Bearer); nothing was uploaded',
    whatToDo:
      "check `upstream.authUrl` (it must name the OAuth server, not a web page or a proxy's login); delivery retries by itself",
  },
  {
    code: ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE,
    meaning:
      'an answer was larger than its byte cap (`upstream.maxAnswerBytes`, `upstream.maxProductListBytes`); the client stopped reading',
    whatToDo:
      "check `upstream.baseUrl` and any proxy in between; raise the cap only if the service's answers really are that large",
  },
  {
    code: ErrorCodes.UPSTREAM_REDIRECT,
    meaning:
      'the service or the token endpoint answered with a redirect (3xx), which is never followed',
    whatToDo:
      'set `upstream.baseUrl`/`upstream.authUrl` to the address the redirect names (`details.location`), after checking it belongs to the operator; delivery retries by itself',
  },
  {
    code: ErrorCodes.EVENTS_NETWORK,
    meaning:
      'status events (contract §6): the Kafka brokers in `upstream.statusEvents.bootstrapServers` cannot be reached (DNS, connect, reset, timeout, no answer to a read); batch outcomes are polled at the normal pace meanwhile',
    whatToDo:
      "check the addresses and that the site firewall lets this host reach the brokers' port; the consumer reconnects by itself",
  },
  {
    code: ErrorCodes.EVENTS_TLS,
    meaning:
      "status events: the brokers' TLS certificate is not trusted or does not name the host it was reached by; nothing was sent to them; polling takes over",
    whatToDo:
      "ask the service operator for the brokers' certificate authority and name it in `upstream.statusEvents.caFile`; check the host names in `bootstrapServers`",
  },
  {
    code: ErrorCodes.EVENTS_AUTH,
    meaning:
      'status events: the brokers refused SASL SCRAM-SHA-512 with `upstream.clientId` and the client secret; polling takes over',
    whatToDo:
      'check the client secret (the same one the token endpoint takes) and ask the operator whether the client id is a user of the brokers',
  },
  {
    code: ErrorCodes.EVENTS_TOPIC,
    meaning:
      'status events: the status topic does not exist, or the client may not describe or read it; polling takes over',
    whatToDo:
      'check `upstream.statusEvents.environment`, `clientInternalName` or `topic`; ask the operator for READ and DESCRIBE on the topic (docs/upstream.md, "Status events")',
  },
  {
    code: ErrorCodes.BODY_TOO_LARGE,
    meaning: 'a direct upload body reached 5.8 MiB',
    whatToDo: 'the batch is split; for `upload`, use a smaller file or pre-signed',
  },
  {
    code: ErrorCodes.PRESIGNED_REFUSED,
    meaning: 'a pre-signed address was used already or expired',
    whatToDo: 'a new address is requested by itself',
  },
  {
    code: ErrorCodes.BUFFER,
    meaning:
      'the SQLite buffer could not be opened or written (a lock held by another process, an I/O error, permissions); on the page also: commits of reads or delivery steps fail, or its disk is full (the kinds below have codes of their own when raised)',
    whatToDo:
      'check disk space and permissions of `buffer.path` (its `-wal` and `-shm` too); intake and delivery retry by themselves and resume when there is room; an unopenable buffer: fix the owner or restore a backup (docs/operations.md)',
  },
  {
    code: ErrorCodes.BUFFER_UNOPENABLE,
    meaning:
      "the buffer cannot be opened at all: corrupt, not a database, not a gateway buffer (an empty file, another program's database: its `application_id` is not the gateway's `SCGW`, or its tables are not the buffer's), a schema newer than this gateway, no permission; the file is left as it was; `run` exits 4, which systemd does not restart. `adopt` and the buffer commands refuse the same files (exit 4); `adopt` also refuses a buffer another process has open",
    whatToDo:
      'check the path (`buffer.path`, `--buffer`, the file given to `adopt`); fix the owner of the buffer files, or restore a backup (docs/operations.md); a newer schema needs the newer gateway; for `adopt`, stop the process that has the file open or adopt a copy of it with its -wal',
  },
  {
    code: ErrorCodes.BUFFER_IO,
    meaning:
      'the disk or file system failed to read or write the buffer (SQLite `SQLITE_IOERR`, "disk I/O error"): a failing disk, a file system remounted read-only, a file removed under the gateway',
    whatToDo:
      'check the disk of `buffer.path` (`dmesg`, `df -h`, `mount`) and that the buffer, its `-wal` and `-shm` are still there; then run the command again or restart the service; if it keeps failing, restore a backup (docs/operations.md)',
  },
  {
    code: ErrorCodes.BUFFER_DAMAGED,
    meaning:
      'a command found the buffer damaged, or the file is no gateway buffer (SQLite `SQLITE_CORRUPT`, "no such table"): the command exits 4',
    whatToDo:
      'check the path (`buffer.path`, `--buffer`); if it is the right file, stop the gateway and restore a backup (docs/operations.md), keeping the damaged file for analysis',
  },
  {
    code: ErrorCodes.BUFFER_DISK_FULL,
    meaning:
      "the disk of the buffer is full (SQLite `SQLITE_FULL`): nothing of the commit was written and the sources keep their reads; inputs that can wait are paused, and until there is room again every submit is refused the same way, so the room of the released reserve stays with delivery. At start: the upgrade of the buffer's schema needed more room and was undone whole (the buffer is as it was)",
    whatToDo:
      "usually nothing: the oldest delivered scans are pruned and intake resumes by itself once the reserve is written again (docs/operations.md §9); if only undelivered data is left, get delivery going or free space on the disk of `buffer.path` (`df -h`). At start: free about twice the buffer file's size and start again (docs/operations.md §6)",
  },
  {
    code: ErrorCodes.BUFFER_QUOTA,
    meaning:
      'new scans were refused: the buffer quota (`buffer.maxPendingScans`, `buffer.maxBytes`) is reached; nothing of the refused submit was written and its source keeps it (HTTP ingest answers 503)',
    whatToDo:
      'get delivery going again (see the other problems); the quota clears as delivery drains and intake resumes by itself',
  },
  {
    code: ErrorCodes.BUFFER_TOO_LARGE,
    meaning:
      'one submit alone is larger than the whole buffer quota and will never be taken: a file chunk is split, a single such read sends its file to `failed/`, HTTP ingest answers 413',
    whatToDo:
      'send fewer or smaller reads at once, or raise `buffer.maxPendingScans`/`buffer.maxBytes` if the disk has room',
  },
  {
    code: ErrorCodes.INPUT,
    meaning:
      'an input could not be opened, or failed while running (its technical detail on the page says why); or a dropped file cannot be taken (not a regular file: a link, FIFO, socket or device; larger than `maxFileBytes`; a format it cannot be read in)',
    whatToDo:
      'check the device, folder or broker named under *Source* (plugged in, reachable, permissions); the input retries by itself; for a file, `failed/<name>.error.txt` and `scan-gateway failures`',
  },
  {
    code: ErrorCodes.USAGE,
    meaning: 'a command was called wrongly (also an admin request with a bad body, answered 400)',
    whatToDo: 'see `--help`',
  },
  {
    code: ErrorCodes.NOT_RUNNING,
    meaning:
      'the part asked is not running: the gateway is starting or stopping, or a reload removed the input; nothing was done (HTTP ingest answers 503, an admin action 500)',
    whatToDo:
      'retry in a moment; if it persists, see the state of the gateway (`systemctl status scan-gateway`)',
  },
  {
    code: ErrorCodes.LISTEN,
    meaning:
      'an HTTP server of the gateway (health, an `http` input) could not listen on its address: in use by another program, or not allowed (a port below 1024, an address not of this machine)',
    whatToDo:
      'the message names the configuration key: stop the other program or choose another address or port',
  },
  {
    code: ErrorCodes.LISTENER_TLS,
    meaning:
      "the local server's TLS files (`http.tls`) cannot be read, are not PEM, or the key is not the certificate's; or a renewed certificate has ended or has not begun. At start the gateway does not start; on a reload (SIGHUP, the files changed) the running certificate stays and the page says so",
    whatToDo:
      'run `scan-gateway config check`: it names the key and the file; put the new certificate and its key in place together (write both beside, then rename them over); the files are watched, or run `systemctl reload scan-gateway` (docs/operations.md, "TLS on the local listener")',
  },
  {
    code: ErrorCodes.HA_ETCD,
    meaning:
      'high availability: the etcd cluster cannot be reached (every endpoint in `ha.etcd.endpoints` failed or timed out), refused the login or certificate, or answered an error; a leader that cannot renew its lease stops taking reads before the lease lapses',
    whatToDo:
      'check the etcd members (`etcdctl endpoint health`), the network to them, and `ha.etcd` (CA, client certificate, user and password file); the node campaigns again by itself',
  },
  {
    code: ErrorCodes.HA_NOT_LEADER,
    meaning:
      'high availability: this node does not hold the leader lease (a standby, or a leader past its renewal deadline, fenced): the read was not taken and not acknowledged, so its source sends it again to the leader',
    whatToDo:
      'nothing for a standby; a fenced leader gives way to the other node, which takes over within the lease time (docs/high-availability.md)',
  },
  {
    code: ErrorCodes.SANDBOX_KAFKA,
    meaning:
      'the Kafka endpoint of the sandbox (demo and tests only) received a frame it cannot read (not Kafka, a version it does not speak, a record batch with a wrong CRC-32C) and closed that connection, or could not make its certificates',
    whatToDo:
      'check the client points at the sandbox with SASL_SSL and SCRAM-SHA-512 (`GET /_sandbox/kafka`); the sandbox log line names the client address and the frame',
  },
  {
    code: ErrorCodes.STOP,
    meaning:
      'stopping failed for some part, or took longer than the stop deadline; the process exits anyway',
    whatToDo:
      'the log line `stopping a part failed` names the part; reads not acknowledged yet are sent again by their sources',
  },
  {
    code: ErrorCodes.INTERNAL,
    meaning:
      'something that cannot fail did: a bug in the gateway, or a broken installation (files missing from the package)',
    whatToDo:
      'report it with the log line and the version (`scan-gateway --version`); reinstall the package if files are missing',
  },
];
