// What the CLI's own Redis and PostgreSQL clients share: TLS, and reading their URLs.

/**
 * Whether a TLS handshake's error is the server's certificate or a server that speaks no TLS
 * (configuration: NODE_EXTRA_CA_CERTS, the host name, the URL's scheme), rather than the network
 * failing (a reset, a timeout), which a retry may fix.
 */
export function tlsRefusal(error: Error & { code?: string }): boolean {
  return /CERT|UNABLE_TO_|ERR_SSL_WRONG_VERSION_NUMBER|ERR_SSL_PACKET_LENGTH_TOO_LONG/.test(error.code ?? "");
}

/** The server name to send (SNI) for `host`: none for an IP address. */
export const serverName = (host: string): { servername?: string } =>
  /^[\d.:]+$/.test(host) ? {} : { servername: host };

/**
 * A URL's percent-encoded part (`what`: its user name, its password, ...) decoded; an Error says
 * what is wrong when the escapes are not UTF-8 (the message never shows the part: it may be secret).
 */
export function decodedPart(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new Error(
      `has a %-escape in ${what} that is not UTF-8 (escape each byte of its UTF-8 text, as %C3%A9 for é)`,
    );
  }
}
