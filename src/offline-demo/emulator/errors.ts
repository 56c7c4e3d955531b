/** An error the emulated portal answers with, in Bitrix24's `{"error","error_description"}` shape. */
export class RestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly description: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(`${status} ${code}: ${description}`);
    this.name = "RestError";
  }

  toBody(): Record<string, unknown> {
    return { error: this.code, error_description: this.description, ...this.extra };
  }
}

export const errors = {
  invalidCredentials: () => new RestError(401, "INVALID_CREDENTIALS", "Invalid request credentials"),
  methodNotFound: () => new RestError(404, "ERROR_METHOD_NOT_FOUND", "Method not found!"),
  queryLimit: () => new RestError(503, "QUERY_LIMIT_EXCEEDED", "Too many requests"),
  bodyTooLarge: (limit: number) =>
    new RestError(413, "REQUEST_ENTITY_TOO_LARGE", `Request body is larger than ${limit} bytes`),
  wrongTaskId: () => new RestError(400, "0", "wrong task id"),
  missingTaskId: () =>
    new RestError(
      400,
      "100",
      "CTaskItem All parameters in the constructor must have real class type (internal error)",
    ),
  missingParam: (name: string) =>
    new RestError(400, "100", `Could not find value for parameter {${name}} (internal error)`),
  notArray: (name: string, value: unknown) =>
    new RestError(
      400,
      "100",
      `Invalid value {${typeof value === "string" || typeof value === "number" ? value : ""}} to match with parameter {${name}}. Should be value of type array. (internal error)`,
    ),
  actionNotAllowed: () => new RestError(400, "0", "Action on the task is not allowed (internal error)"),
  accessDenied: () => new RestError(400, "0", "Access denied. (internal error)"),
  invalidSortKey: () => new RestError(400, "0", "Invalid sorting key (internal error)"),
  /** Business-rule failures; Bitrix24 joins one `<br>`-terminated line per problem. */
  core: (messages: string[]) => new RestError(400, "ERROR_CORE", messages.map((m) => `${m}<br>`).join("")),
  internal: (message: string) => new RestError(500, "INTERNAL_SERVER_ERROR", message),
  insufficientScope: () =>
    new RestError(
      403,
      "insufficient_scope",
      "The request requires higher privileges than provided by the webhook token",
    ),
  /** CRM methods answer with an empty error code and the reason in the description. */
  crm: (description: string) => new RestError(400, "", description),
  /** tasks.task.delete of a missing task, or one the user may not delete. */
  noDeleteAccess: () => new RestError(400, "1048582", "No access to delete the task"),
};
