/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header?.match(/^Bearer[ \t]+(\S+)[ \t]*$/i);
  return match?.[1];
}
