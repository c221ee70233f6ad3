import { z } from 'zod';

/** A key as plant IT and the service write them: non-empty, no white space. */
export const key = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[^\s]+$/, 'must not contain white space');
