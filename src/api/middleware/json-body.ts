// Request bodies are JSON or nothing: any other content type is a 415 before parsing.
import express, { type NextFunction, type Request, type Response } from 'express';
import { unsupportedMediaType } from '../../errors.ts';

/** Large enough for a 256 KB job payload with its envelope; job payloads have their own limit. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

const parseJson = express.json({ limit: BODY_LIMIT_BYTES, type: () => true });

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export function jsonBody(req: Request, res: Response, next: NextFunction): void {
  if (!hasBody(req)) return next();
  if (!req.is(['application/json', '+json'])) return next(unsupportedMediaType());
  parseJson(req, res, next);
}
