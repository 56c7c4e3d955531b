/**
 * A task as tasks.task.get returns it (camelCase keys, string values, ISO dates with offset), shaped
 * like the emulator's task 4. For tests and the benchmark; nothing in src/ uses it.
 */
export function exampleTask(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: "4",
    parentId: null,
    title: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
    description:
      "Test task for the action envelope: an agent proposes a change, a human approves it, and exactly that change is executed.",
    mark: null,
    priority: "1",
    multitask: "N",
    notViewed: "N",
    replicate: "N",
    stageId: "0",
    createdBy: "1",
    createdDate: "2026-11-16T10:00:00+03:00",
    responsibleId: "5",
    changedBy: "1",
    changedDate: "2026-11-25T14:30:05+03:00",
    statusChangedBy: null,
    statusChangedDate: "2026-11-25T14:30:05+03:00",
    closedBy: null,
    closedDate: null,
    activityDate: "2026-11-25T14:30:05+03:00",
    dateStart: null,
    deadline: "2026-12-15T18:00:00+03:00",
    startDatePlan: null,
    endDatePlan: null,
    guid: "{7a5e0000-0000-4000-8000-000000000004}",
    xmlId: null,
    commentsCount: null,
    serviceCommentsCount: null,
    allowChangeDeadline: "N",
    allowTimeTracking: "N",
    taskControl: "N",
    addInReport: "N",
    timeEstimate: "0",
    matchWorkTime: "N",
    forumTopicId: null,
    forumId: null,
    siteId: "s1",
    subordinate: "N",
    outlookVersion: "1",
    viewedDate: null,
    durationFact: null,
    isMuted: "N",
    isPinned: "N",
    descriptionInBbcode: "Y",
    status: "2",
    durationPlan: null,
    durationType: "days",
    favorite: "N",
    groupId: "3",
    auditors: ["2", "6"],
    accomplices: ["3"],
    checklist: [],
    group: { id: "3", name: "Agent Lab", opened: false },
    creator: {
      id: "1",
      name: "Anna Petrova",
      link: "/company/personal/user/1/",
      icon: "",
      workPosition: "Portal administrator",
    },
    responsible: {
      id: "5",
      name: "Elena Kuznetsova",
      link: "/company/personal/user/5/",
      icon: "",
      workPosition: "Operations lead",
    },
    accomplicesData: [],
    auditorsData: [],
    newCommentsCount: 0,
    action: {
      accept: false,
      decline: false,
      complete: true,
      edit: true,
      remove: true,
      "edit.originator": false,
    },
    ...overrides,
  };
}

/** The response body of tasks.task.get for a task. */
export function taskBody(task: Record<string, unknown>): {
  result: { task: Record<string, unknown> };
  time: Record<string, unknown>;
} {
  return { result: { task }, time: { start: 1764070205, finish: 1764070205.01, duration: 0.01 } };
}
