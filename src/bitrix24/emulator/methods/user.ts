import { formatPortalDate } from "../dates.js";
import type { MethodHandler } from "./context.js";

/** The webhook user, in `user.current`'s UPPER_SNAKE shape. */
export const currentUser: MethodHandler = (_params, ctx) => {
  const u = ctx.store.getUser(ctx.userId);
  const registered = formatPortalDate(Date.parse("2026-01-12T09:00:00+03:00") / 1000);
  return {
    result: {
      ID: String(ctx.userId),
      XML_ID: null,
      ACTIVE: true,
      NAME: u?.name ?? "",
      LAST_NAME: u?.lastName ?? "",
      SECOND_NAME: u?.secondName ?? "",
      EMAIL: u?.email ?? "",
      LAST_LOGIN: formatPortalDate(ctx.nowSec),
      DATE_REGISTER: registered,
      TIME_ZONE: "",
      IS_ONLINE: "Y",
      TIMESTAMP_X: registered,
      LAST_ACTIVITY_DATE: formatPortalDate(ctx.nowSec),
      PERSONAL_GENDER: "",
      PERSONAL_BIRTHDAY: "",
      WORK_POSITION: u?.workPosition ?? "",
      UF_EMPLOYMENT_DATE: "",
      UF_DEPARTMENT: [1],
      USER_TYPE: "employee",
    },
  };
};
