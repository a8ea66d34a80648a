/*
 * methods: the one table of the Bot API methods the emulator emulates, by Bot API name.
 * A method added to the emulator gets its row here and its handler in the file of its
 * room (handlers.h lists them); every other method of the generated model answers "not
 * emulated" (api.c).
 */
#include "emulator/handlers.h"

#include <string.h>

static const emu_method_entry methods[] = {
    /* messages and updates (api_msg.c), webhooks (webhook.c) */
    {"getMe", emu_h_get_me},
    {"logOut", emu_h_true},
    {"close", emu_h_true},
    {"getUpdates", emu_h_get_updates},
    {"setWebhook", emu_webhook_set},
    {"deleteWebhook", emu_webhook_delete},
    {"getWebhookInfo", emu_webhook_info},
    {"sendMessage", emu_h_send_message},
    {"forwardMessage", emu_h_forward_message},
    {"copyMessage", emu_h_copy_message},
    {"sendChatAction", emu_h_send_chat_action},
    {"editMessageText", emu_h_edit_message_text},
    {"editMessageCaption", emu_h_edit_message_caption},
    {"editMessageReplyMarkup", emu_h_edit_message_reply_markup},
    {"deleteMessage", emu_h_delete_message},
    {"deleteMessages", emu_h_delete_messages},
    {"pinChatMessage", emu_h_pin_chat_message},
    {"unpinChatMessage", emu_h_unpin_chat_message},
    {"unpinAllChatMessages", emu_h_unpin_all_chat_messages},
    {"answerCallbackQuery", emu_h_answer_callback_query},
    {"answerInlineQuery", emu_h_answer_inline_query},
    /* chats, members, commands (api_chat.c) */
    {"getChat", emu_h_get_chat},
    {"getChatMember", emu_h_get_chat_member},
    {"getChatMemberCount", emu_h_get_chat_member_count},
    {"getChatAdministrators", emu_h_get_chat_administrators},
    {"banChatMember", emu_h_ban_chat_member},
    {"unbanChatMember", emu_h_unban_chat_member},
    {"restrictChatMember", emu_h_restrict_chat_member},
    {"promoteChatMember", emu_h_promote_chat_member},
    {"leaveChat", emu_h_leave_chat},
    {"approveChatJoinRequest", emu_h_approve_chat_join_request},
    {"declineChatJoinRequest", emu_h_decline_chat_join_request},
    {"setChatTitle", emu_h_set_chat_title},
    {"setChatDescription", emu_h_set_chat_description},
    {"setMyCommands", emu_h_set_my_commands},
    {"getMyCommands", emu_h_get_my_commands},
    {"deleteMyCommands", emu_h_delete_my_commands},
    /* files and media (api_media.c) */
    {"sendMediaGroup", emu_h_send_media_group},
    {"getFile", emu_h_get_file},
    {"sendPhoto", emu_h_send_photo},
    {"sendDocument", emu_h_send_document},
    {"sendAudio", emu_h_send_audio},
    {"sendVideo", emu_h_send_video},
    {"sendVoice", emu_h_send_voice},
    {"sendAnimation", emu_h_send_animation},
    {"sendLocation", emu_h_send_location},
    {"sendContact", emu_h_send_contact},
    {"sendDice", emu_h_send_dice},
};

emu_handler emu_find_handler(const char *name)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].name, name))
            return methods[i].fn;
    return NULL;
}

bool emu_api_emulated(const char *method)
{
    return emu_find_handler(method) != NULL;
}
